package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed-0809debe/posture"
)

// The checks page's backtests: an admin edits a check's body as the
// management API's PUT takes it, picks a window, and the console starts a
// backtest of that one change through the management API (POST
// /backtests) with the admin's own session, so that authorization,
// validation and the one-job-at-a-time limit are the API's. The job page
// follows the job (GET /backtests/{id}) and shows its report.

// backtestWindow is the default window of a backtest: the last 7 days.
const backtestWindow = 7 * 24 * time.Hour

// changesShown is how many changed decisions and transitions the job page
// lists (the totals count every one).
const changesShown = 100

// refreshSeconds is how often a running job's page reloads itself.
const refreshSeconds = 2

// candidatesKept bounds the candidates the console remembers, one per job
// it started (the node keeps at most 16 jobs).
const candidatesKept = 32

// candidates are the edited bodies of the backtests this console started,
// by job id, so that the job's page shows what was tested and "again"
// opens the form with it. The API's job does not hold its candidate; like
// the job, this is kept in the node's memory only, the newest
// candidatesKept.
type candidates struct {
	mu    sync.Mutex
	byJob map[string]backtestForm
	order []string
}

func (cs *candidates) put(job string, f backtestForm) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byJob == nil {
		cs.byJob = map[string]backtestForm{}
	}
	f.Error, f.Field = "", ""
	cs.byJob[job] = f
	cs.order = append(cs.order, job)
	for len(cs.order) > candidatesKept {
		delete(cs.byJob, cs.order[0])
		cs.order = cs.order[1:]
	}
}

func (cs *candidates) get(job string) (backtestForm, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	f, ok := cs.byJob[job]
	return f, ok
}

// readOnlyFields are the fields of a check's GET view that its PUT body
// does not take.
var readOnlyFields = []string{"id", "version", "createdAt", "updatedAt", "_links"}

// backtestForm is the form page's data.
type backtestForm struct {
	CheckID, CheckName string
	Body               string
	From, Until        string
	// Error is the API's (or the form's) message; Field the path of the
	// offending field, when it names one.
	Error, Field string
	// Stopped: a job was just stopped from its page (the notice names no
	// job: the address it comes from is anyone's to write).
	Stopped bool
}

// backtestPage is GET /console/checks/{id}/backtest: the form, with the
// check's current body (its GET view without the fields PUT does not take,
// as pretty JSON) and the last 7 days (from a week ago; no until: to the
// log's end). With job=<id> of a backtest of this check that the console
// started, the form holds that job's candidate and window instead: "again"
// goes on from what was tested, not from the stored check.
func (c *Console) backtestPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	job, stopped := r.URL.Query().Get("job"), r.URL.Query().Get("stopped") != ""
	if f, ok := c.candidates.get(job); ok && f.CheckID == id {
		f.Stopped = stopped
		c.renderBacktest(w, r, http.StatusOK, f)
		return
	}
	a, err := c.call(r, http.MethodGet, c.opts.ManagementBase+"/posture-checks/"+urlPath(id), sessionOf(r), nil)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if a.status != http.StatusOK {
		c.apiFail(w, r, a)
		return
	}
	body, name, err := putBody(a.body.Bytes())
	if err != nil {
		c.fail(w, r, fmt.Errorf("console: posture check %s: %w", id, err))
		return
	}
	now := c.opts.Now().UTC().Truncate(time.Second)
	c.renderBacktest(w, r, http.StatusOK, backtestForm{CheckID: id, CheckName: name, Body: body,
		From: now.Add(-backtestWindow).Format(time.RFC3339), Stopped: stopped})
}

// putBody turns a check's GET answer into its PUT body, pretty, with
// ">" and "<" as they are (html/template escapes them on the page), and
// numbers as the API wrote them.
func putBody(answer []byte) (body, name string, err error) {
	var env struct {
		Data map[string]any `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return "", "", err
	}
	name, _ = env.Data["name"].(string)
	for _, f := range readOnlyFields {
		delete(env.Data, f)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(env.Data); err != nil {
		return "", "", err
	}
	return strings.TrimSpace(b.String()), name, nil
}

func (c *Console) renderBacktest(w http.ResponseWriter, r *http.Request, status int, f backtestForm) {
	title := "Backtest " + f.CheckName
	if f.CheckName == "" {
		title = "Backtest " + f.CheckID
	}
	c.render(w, r, status, "backtest", map[string]any{"Title": title, "Form": f})
}

// startBacktest is POST /console/checks/{id}/backtest: the edited body
// becomes the candidate {"postureChecks": {"update": {id: body}}} over the
// window, started through the API; then the job's page. The API's errors
// (400 with the field's path, 404, 429 while another backtest runs) are
// shown on the form, with what was typed.
func (c *Console) startBacktest(w http.ResponseWriter, r *http.Request) {
	f := backtestForm{CheckID: r.PathValue("id"), CheckName: r.PostFormValue("name"),
		Body: r.PostFormValue("body"), From: strings.TrimSpace(r.PostFormValue("from")), Until: strings.TrimSpace(r.PostFormValue("until"))}
	again := func(status int, field, msg string) {
		f.Field, f.Error = field, msg
		c.renderBacktest(w, r, status, f)
	}
	body := bytes.TrimSpace([]byte(f.Body))
	if !json.Valid(body) {
		again(http.StatusBadRequest, "body", "the check's body is not JSON: "+jsonError(body))
		return
	}
	doc := map[string]any{"postureChecks": map[string]any{"update": map[string]json.RawMessage{f.CheckID: body}}}
	for _, t := range []struct{ field, v string }{{"from", f.From}, {"until", f.Until}} {
		if t.v == "" {
			continue
		}
		at, err := parseTime(t.v, c.opts.Now())
		if err != nil {
			again(http.StatusBadRequest, t.field, t.field+" "+timeHint)
			return
		}
		doc[t.field] = at.Format(time.RFC3339Nano)
	}
	a, err := c.call(r, http.MethodPost, c.opts.ManagementBase+"/backtests", sessionOf(r), doc)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if a.status != http.StatusAccepted {
		e := a.apiError()
		msg := e.Message
		if e.Cause.Reason != "" {
			// A validation failure: its generic message says "see cause".
			msg = e.Cause.Reason
		}
		if e.Cause.RetryAfterSeconds > 0 {
			msg += " (try again in " + strconv.Itoa(e.Cause.RetryAfterSeconds) + "s)"
		}
		again(a.status, e.Cause.Field, msg)
		return
	}
	job, err := answerData[Job](a)
	if err != nil || job.ID == "" {
		c.fail(w, r, fmt.Errorf("console: backtest answer: %v", err))
		return
	}
	c.candidates.put(job.ID, f)
	http.Redirect(w, r, "/console/backtests/"+urlPath(job.ID)+"?check="+urlEscape(f.CheckID), http.StatusSeeOther)
}

// jsonError says where a body stops being JSON.
func jsonError(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at character %d)", se.Error(), se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "empty"
}

// Job is a backtest job as GET /backtests/{id} shows it: the fields the
// console reads.
type Job struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	From       *time.Time `json:"from"`
	Until      *time.Time `json:"until"`
	Progress   struct {
		Seq     uint64 `json:"seq"`
		LastSeq uint64 `json:"lastSeq"`
	} `json:"progress"`
	Error  string  `json:"error"`
	Report *Report `json:"report"`
}

// Percent is the job's progress in whole percent.
func (j Job) Percent() int {
	if j.Progress.LastSeq == 0 {
		return 0
	}
	return int(j.Progress.Seq * 100 / j.Progress.LastSeq)
}

// Report is a backtest's report as the API gives it (the fields the page
// shows).
type Report struct {
	Window struct {
		From       *time.Time `json:"from"`
		Until      *time.Time `json:"until"`
		FirstEvent *time.Time `json:"firstEvent"`
		LastEvent  *time.Time `json:"lastEvent"`
		Events     uint64     `json:"events"`
	} `json:"window"`
	Changed bool `json:"changed"`
	Totals  struct {
		Decisions                    int `json:"decisions"`
		Granted                      int `json:"granted"`
		Denied                       int `json:"denied"`
		NewlyDenied                  int `json:"newlyDenied"`
		NewlyAllowed                 int `json:"newlyAllowed"`
		NewlyWouldDeny               int `json:"newlyWouldDeny"`
		IdentitiesNewlyDenied        int `json:"identitiesNewlyDenied"`
		IdentitiesNewlyAllowed       int `json:"identitiesNewlyAllowed"`
		IdentitiesNewlyWouldDeny     int `json:"identitiesNewlyWouldDeny"`
		Transitions                  int `json:"transitions"`
		TransitionsUnchanged         int `json:"transitionsUnchanged"`
		TransitionsOnlyRecorded      int `json:"transitionsOnlyRecorded"`
		TransitionsOfRefusedSessions int `json:"transitionsOfRefusedSessions"`
		TransitionsOnlyCandidate     int `json:"transitionsOnlyCandidate"`
		RemovalsOnlyRecorded         int `json:"removalsOnlyRecorded"`
		RemovalsOnlyCandidate        int `json:"removalsOnlyCandidate"`
	} `json:"totals"`
	Services   []ReportImpact `json:"services"`
	Checks     []ReportImpact `json:"checks"`
	LostAccess []struct {
		IdentityID   string    `json:"identityId"`
		IdentityName string    `json:"identityName"`
		At           time.Time `json:"at"`
		Seq          uint64    `json:"seq"`
		ServiceID    string    `json:"serviceId"`
		ServiceName  string    `json:"serviceName"`
		How          string    `json:"how"`
	} `json:"lostAccess"`
	FailingValues []FailingValue `json:"failingValues"`
	Enforcements  []struct {
		CheckID   string     `json:"checkId"`
		CheckName string     `json:"checkName"`
		EnforceAt *time.Time `json:"enforceAt"`
	} `json:"enforcements"`
	Changes        []ReportChange `json:"changes"`
	ChangesOmitted int            `json:"changesOmitted"`
}

// ReportImpact is a service's or a check's newly denied and allowed
// identities and requests.
type ReportImpact struct {
	ID                     string `json:"id"`
	Name                   string `json:"name"`
	Type                   string `json:"type"`
	NewlyDeniedIdentities  int    `json:"newlyDeniedIdentities"`
	NewlyDeniedRequests    int    `json:"newlyDeniedRequests"`
	NewlyAllowedIdentities int    `json:"newlyAllowedIdentities"`
	NewlyAllowedRequests   int    `json:"newlyAllowedRequests"`
	// A report-only check's requests granted that enforcement would deny.
	NewlyWouldDenyIdentities int `json:"newlyWouldDenyIdentities"`
	NewlyWouldDenyRequests   int `json:"newlyWouldDenyRequests"`
}

// FailingValue is a value reported to a check that refuses newly denied
// requests.
type FailingValue struct {
	CheckID    string `json:"checkId"`
	CheckName  string `json:"checkName"`
	CheckType  string `json:"checkType"`
	Value      string `json:"value"`
	Identities int    `json:"identities"`
	Requests   int    `json:"requests"`
}

// edited splits a report's per-check rows and failing values into those
// of the edited check and those of the others: a request the edit newly
// denies is refused by every policy it could have passed, so the checks
// of the other policies that the identity fails are counted too, though
// they did not change.
func (rep *Report) edited(checkID string) map[string]any {
	mine, others := partition(rep.Checks, func(ch ReportImpact) bool { return ch.ID == checkID })
	myValues, otherValues := partition(rep.FailingValues, func(v FailingValue) bool { return v.CheckID == checkID })
	return map[string]any{"Checks": mine, "OtherChecks": others, "Values": myValues, "OtherValues": otherValues}
}

// partition splits list into the elements in reports true of and the
// others, each in order.
func partition[T any](list []T, in func(T) bool) (yes, no []T) {
	for _, x := range list {
		if in(x) {
			yes = append(yes, x)
		} else {
			no = append(no, x)
		}
	}
	return yes, no
}

// ReportChange is a decision or transition that differs.
type ReportChange struct {
	Seq          uint64    `json:"seq"`
	EventID      string    `json:"eventId"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	IdentityID   string    `json:"identityId"`
	IdentityName string    `json:"identityName"`
	APISessionID string    `json:"apiSessionId"`
	ServiceName  string    `json:"serviceName"`
	SessionType  string    `json:"sessionType"`
	PolicyName   string    `json:"policyName"`
	Recorded     string    `json:"recorded"`
	Candidate    string    `json:"candidate"`
}

// Timeline is the identity page's address around the change, at its event.
func (ch ReportChange) Timeline() string {
	return "/console/identities/" + urlPath(ch.IdentityID) + "?from=" + urlEscape(ch.At.Add(-time.Hour).UTC().Format(time.RFC3339)) +
		"&to=" + urlEscape(ch.At.Add(time.Hour).UTC().Format(time.RFC3339)) + "#event-" + strconv.FormatUint(ch.Seq, 10)
}

// backtestJob is GET /console/backtests/{id}: the job's progress, reloaded
// every refreshSeconds while it runs, then its report.
func (c *Console) backtestJob(w http.ResponseWriter, r *http.Request) {
	a, err := c.call(r, http.MethodGet, c.opts.ManagementBase+"/backtests/"+urlPath(r.PathValue("id")), sessionOf(r), nil)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if a.status == http.StatusNotFound {
		c.render(w, r, http.StatusNotFound, "error", map[string]any{"Title": "Backtest not found", "Message": "No backtest job " +
			strconv.Quote(r.PathValue("id")) + " on this node: a job is kept in the node's memory for an hour after it ends, and forgotten when the node restarts."})
		return
	}
	if a.status != http.StatusOK {
		c.apiFail(w, r, a)
		return
	}
	job, err := answerData[Job](a)
	if err != nil {
		c.fail(w, r, fmt.Errorf("console: backtest %s: %w", r.PathValue("id"), err))
		return
	}
	checkID := r.URL.Query().Get("check")
	cand, known := c.candidates.get(job.ID)
	if known {
		checkID = cand.CheckID
	}
	data := map[string]any{"Title": "Backtest " + job.ID, "Job": job, "CheckID": checkID}
	if known {
		data["Candidate"] = cand
	}
	if job.Status == "running" {
		data["Refresh"] = refreshSeconds
	}
	if rep := job.Report; rep != nil {
		shown := rep.Changes[:min(len(rep.Changes), changesShown)]
		// Identities deleted since have no page to link to.
		gone := map[string]bool{}
		look := func(id string) {
			if _, seen := gone[id]; !seen {
				_, err := c.opts.Store.Identity(id)
				gone[id] = errors.Is(err, posture.ErrNotFound)
			}
		}
		for _, l := range rep.LostAccess {
			look(l.IdentityID)
		}
		for _, ch := range shown {
			look(ch.IdentityID)
		}
		data["Gone"] = gone
		data["Shown"] = shown
		data["NotShown"] = len(rep.Changes) - min(len(rep.Changes), changesShown) + rep.ChangesOmitted
		data["Edited"] = rep.edited(checkID)
	}
	c.render(w, r, http.StatusOK, "backtestjob", data)
}

// stopBacktest is POST /console/backtests/{id}/stop: a running job is
// stopped and forgotten (DELETE /backtests/{id}), then the check's
// backtest form (or the checks page) says so; a job that ended meanwhile
// is not, and its page shows its report.
func (c *Console) stopBacktest(w http.ResponseWriter, r *http.Request) {
	job := c.opts.ManagementBase + "/backtests/" + urlPath(r.PathValue("id"))
	// A job that ended since its page was shown keeps its report: its page
	// again, not a stop that would forget it.
	a, err := c.call(r, http.MethodGet, job, sessionOf(r), nil)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if job, err := answerData[Job](a); a.status == http.StatusOK && err == nil && job.Status != "running" {
		http.Redirect(w, r, "/console/backtests/"+urlPath(r.PathValue("id"))+"?check="+urlEscape(r.PostFormValue("check")), http.StatusSeeOther)
		return
	}
	if a, err = c.call(r, http.MethodDelete, job, sessionOf(r), nil); err != nil {
		c.fail(w, r, err)
		return
	}
	if a.status != http.StatusOK && a.status != http.StatusAccepted && a.status != http.StatusNotFound { // one forgotten meanwhile is stopped too
		c.apiFail(w, r, a)
		return
	}
	to := "/console/checks"
	if check := r.PostFormValue("check"); check != "" {
		to = "/console/checks/" + urlPath(check) + "/backtest?job=" + urlEscape(r.PathValue("id")) + "&stopped=1"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// apiFail renders an API error answer on the error page: its status and
// its message (the API never puts internal detail in one).
func (c *Console) apiFail(w http.ResponseWriter, r *http.Request, a *apiAnswer) {
	status := a.status
	if status < 400 {
		status = http.StatusBadGateway
	}
	c.render(w, r, status, "error", map[string]any{"Title": "Error", "Message": a.apiError().Message})
}

// apiErr is the error object of an API error envelope.
type apiErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Cause   struct {
		Field             string `json:"field"`
		Reason            string `json:"reason"`
		RetryAfterSeconds int    `json:"retryAfterSeconds"`
	} `json:"cause"`
}

func (a *apiAnswer) apiError() apiErr {
	var env struct {
		Error apiErr `json:"error"`
	}
	_ = json.Unmarshal(a.body.Bytes(), &env)
	if env.Error.Message == "" {
		env.Error.Message = http.StatusText(a.status)
	}
	return env.Error
}

// sessionOf is the signed-in admin's API session (admin has checked it).
func sessionOf(r *http.Request) string {
	if ck, err := r.Cookie(SessionCookie); err == nil {
		return ck.Value
	}
	return ""
}

func urlPath(s string) string { return url.PathEscape(s) }
