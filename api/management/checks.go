package management

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/evaluator"
)

// checkInput is the body of a posture check create, update or patch. It
// accepts the seed's spellings (attributes, a process's os, OneOf, a DOMAIN
// check's macAddresses) beside the wire reference's.
type checkInput struct {
	TypeID                string         `json:"typeId"`
	Name                  *string        `json:"name,omitempty"`
	RoleAttributes        *[]string      `json:"roleAttributes,omitempty"`
	Attributes            *[]string      `json:"attributes,omitempty"`
	Tags                  posture.Tags   `json:"tags,omitempty"`
	OperatingSystems      []osInput      `json:"operatingSystems,omitempty"`
	MACAddresses          []string       `json:"macAddresses,omitempty"`
	Domains               []string       `json:"domains,omitempty"`
	Process               *processInput  `json:"process,omitempty"`
	Semantic              string         `json:"semantic,omitempty"`
	Processes             []processInput `json:"processes,omitempty"`
	TimeoutSeconds        *int64         `json:"timeoutSeconds,omitempty"`
	PromptOnWake          *bool          `json:"promptOnWake,omitempty"`
	PromptOnUnlock        *bool          `json:"promptOnUnlock,omitempty"`
	IgnoreLegacyEndpoints *bool          `json:"ignoreLegacyEndpoints,omitempty"`
	MaxAgeSeconds         *int64         `json:"maxAgeSeconds,omitempty"`
	OnStale               *string        `json:"onStale,omitempty"`
	Enforcement           *enforcementIn `json:"enforcement,omitempty"`
}

// enforcementIn is a check's enforcement as the API takes it: mode
// "enforce" or "report", enforceAt an RFC 3339 time or null, and a message
// for the user. Absent or null: enforce.
type enforcementIn struct {
	Mode      string  `json:"mode"`
	EnforceAt *string `json:"enforceAt"`
	Message   string  `json:"message,omitempty"`
}

type osInput struct {
	Type     string   `json:"type"`
	Versions []string `json:"versions"`
}

type processInput struct {
	OSType             string   `json:"osType,omitempty"`
	OS                 string   `json:"os,omitempty"`
	Path               string   `json:"path"`
	Hashes             []string `json:"hashes,omitempty"`
	SignerFingerprints []string `json:"signerFingerprints,omitempty"`
	SignerFingerprint  string   `json:"signerFingerprint,omitempty"`
}

func (a *API) checks() *resource[posture.Check, checkInput] {
	return &resource[posture.Check, checkInput]{
		a: a, kind: posture.KindCheck, noun: "posture check",
		input: checkToInput, build: a.buildCheck, view: pure(checkView),
		aliases:    [][]string{{"roleAttributes", "attributes"}, {"domains", "macAddresses"}},
		keepOnNull: []string{"operatingSystems", "macAddresses", "domains", "process", "processes"},
	}
}

func checkToInput(c posture.Check, _ time.Time) checkInput {
	in := checkInput{
		TypeID: string(c.TypeID), Name: &c.Name, RoleAttributes: &c.RoleAttributes, Tags: c.Tags,
		MACAddresses: c.MACAddresses, Domains: c.Domains, Semantic: c.Semantic,
	}
	for _, o := range c.OperatingSystems {
		in.OperatingSystems = append(in.OperatingSystems, osInput(o))
	}
	toInput := func(p posture.Process) processInput {
		return processInput{OSType: p.OSType, Path: p.Path, Hashes: p.Hashes, SignerFingerprints: p.SignerFingerprints}
	}
	if c.Process != nil {
		p := toInput(*c.Process)
		in.Process = &p
	}
	for _, p := range c.Processes {
		in.Processes = append(in.Processes, toInput(p))
	}
	if c.MaxAgeSeconds > 0 {
		in.MaxAgeSeconds, in.OnStale = &c.MaxAgeSeconds, &c.OnStale
	}
	if e := c.Enforcement; e != nil {
		in.Enforcement = &enforcementIn{Mode: e.Mode, Message: e.Message}
		if e.EnforceAt != nil {
			at := e.EnforceAt.UTC().Format(time.RFC3339Nano)
			in.Enforcement.EnforceAt = &at
		}
	}
	if c.TypeID == posture.CheckMFA {
		in.TimeoutSeconds, in.PromptOnWake, in.PromptOnUnlock, in.IgnoreLegacyEndpoints =
			&c.TimeoutSeconds, &c.PromptOnWake, &c.PromptOnUnlock, &c.IgnoreLegacyEndpoints
	}
	return in
}

// checkType normalises a typeId.
func checkType(s string) (posture.CheckType, bool) {
	t := posture.CheckType(strings.ToUpper(strings.TrimSpace(s)))
	for _, known := range posture.CheckTypes {
		if t == known {
			return t, true
		}
	}
	return "", false
}

func (a *API) buildCheck(in checkInput, old *posture.Check, now time.Time) (posture.Check, error) {
	var c posture.Check
	typ, ok := checkType(in.TypeID)
	switch {
	case in.TypeID == "" && old != nil:
		typ = old.TypeID
	case in.TypeID == "":
		return c, posture.Invalid("typeId", "is required: one of OS, MAC, MFA, PROCESS, PROCESS_MULTI, DOMAIN", nil)
	case !ok:
		return c, posture.Invalid("typeId", "must be one of OS, MAC, MFA, PROCESS, PROCESS_MULTI, DOMAIN", in.TypeID)
	case old != nil && typ != old.TypeID:
		return c, posture.Invalid("typeId", "the type of a posture check cannot change", in.TypeID)
	}
	c.TypeID = typ
	var oldID string
	var oldCreated time.Time
	if old != nil {
		oldID, oldCreated = old.ID, old.CreatedAt
	}
	c.ID, c.CreatedAt = times(oldID, oldCreated, old == nil, now)
	c.UpdatedAt = now

	var err error
	if typ == posture.CheckMFA && (in.Name == nil || strings.TrimSpace(*in.Name) == "") {
		generated := "MFA check " + c.ID
		in.Name = &generated
	}
	if c.Name, err = name("name", in.Name); err != nil {
		return c, err
	}
	if err := a.unique(posture.KindCheck, c.Name, c.ID); err != nil {
		return c, err
	}
	if c.RoleAttributes, err = attributes("roleAttributes", roleAttributes(old), in.RoleAttributes, in.Attributes); err != nil {
		return c, err
	}
	if c.Tags, err = tags(in.Tags); err != nil {
		return c, err
	}

	switch typ {
	case posture.CheckOS:
		c.OperatingSystems, err = operatingSystems(in.OperatingSystems)
	case posture.CheckMAC:
		c.MACAddresses, err = macAddresses(in.MACAddresses)
	case posture.CheckDomain:
		domains := in.Domains
		if domains == nil {
			domains = in.MACAddresses // the seed's sample spells it so
		} else if in.MACAddresses != nil && !slices.Equal(in.MACAddresses, domains) {
			return c, posture.Invalid("domains", "domains and macAddresses spell one field of a DOMAIN check and differ: give one of them", in.MACAddresses)
		}
		c.Domains, err = nonEmptyList("domains", domains)
	case posture.CheckProcess:
		if in.Process == nil {
			return c, posture.Invalid("process", "is required", nil)
		}
		var p posture.Process
		p, err = process("process", *in.Process)
		c.Process = &p
	case posture.CheckProcessMulti:
		c.Semantic, err = processSemantic(in.Semantic)
		if err == nil {
			c.Processes, err = processes(in.Processes)
		}
	case posture.CheckMFA:
		c.TimeoutSeconds = deref(in.TimeoutSeconds, -1)
		if c.TimeoutSeconds <= 0 {
			c.TimeoutSeconds = -1
		}
		if most := int64(maxScheduleAhead / time.Second); c.TimeoutSeconds > most {
			err = posture.Invalid("timeoutSeconds", fmt.Sprintf("must be at most %d (10 years), or 0 or less for no timeout", most), c.TimeoutSeconds)
		}
		c.PromptOnWake = deref(in.PromptOnWake, false)
		c.PromptOnUnlock = deref(in.PromptOnUnlock, false)
		c.IgnoreLegacyEndpoints = deref(in.IgnoreLegacyEndpoints, false)
	}
	if err != nil {
		return c, err
	}
	if c.MaxAgeSeconds, c.OnStale, err = staleRule(typ, in.MaxAgeSeconds, in.OnStale); err != nil {
		return c, err
	}
	var oldEnforcement *posture.Enforcement
	if old != nil {
		oldEnforcement = old.Enforcement
	}
	c.Enforcement, err = enforcement(in.Enforcement, oldEnforcement, now)
	return c, err
}

// maxScheduleAhead bounds how far ahead a check schedules: an enforceAt, an
// age of evidence.
const maxScheduleAhead = 10 * 365 * 24 * time.Hour

// enforcement validates a check's enforcement. A new or changed enforceAt
// of a report-only check must be in the future (a check past it enforces);
// the unchanged enforceAt of a check in report mode is kept as it is, so
// that a check read and written back round-trips (a check that already
// switched to enforce cannot go back to reporting with its past enforceAt).
func enforcement(in *enforcementIn, old *posture.Enforcement, now time.Time) (*posture.Enforcement, error) {
	if in == nil {
		return nil, nil
	}
	e := posture.Enforcement{Mode: strings.ToLower(strings.TrimSpace(in.Mode)), Message: strings.TrimSpace(in.Message)}
	switch e.Mode {
	case posture.EnforceMode, posture.ReportMode:
	case "":
		return nil, posture.Invalid("enforcement.mode", `is required: "enforce" or "report"`, nil)
	default:
		return nil, posture.Invalid("enforcement.mode", `must be "enforce" or "report"`, in.Mode)
	}
	if n := utf8.RuneCountInString(e.Message); n > posture.MaxEnforcementMessage {
		return nil, posture.Invalid("enforcement.message",
			fmt.Sprintf("must be at most %d characters long", posture.MaxEnforcementMessage), n)
	}
	// A message shows to the identities a check denies: a new one must read
	// as it shows (no bidirectional overrides); an older one is kept.
	if old == nil || old.Message != e.Message {
		if err := api.CheckText("enforcement.message", e.Message); err != nil {
			return nil, err
		}
	}
	if in.EnforceAt != nil {
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(*in.EnforceAt))
		if err != nil {
			return nil, posture.Invalid("enforcement.enforceAt", "must be an RFC 3339 time (2006-01-02T15:04:05Z) or null", *in.EnforceAt)
		}
		t = t.UTC().Truncate(time.Millisecond)
		unchanged := old != nil && old.Mode == posture.ReportMode && old.EnforceAt != nil && old.EnforceAt.Equal(t)
		switch {
		case e.Mode == posture.ReportMode && !unchanged && !t.After(now):
			return nil, posture.Invalid("enforcement.enforceAt",
				`must be in the future (a check past its enforceAt enforces: use mode "enforce")`, *in.EnforceAt)
		case e.Mode == posture.EnforceMode && t.After(now):
			return nil, posture.Invalid("enforcement.enforceAt",
				`must not be in the future with mode "enforce" (to enforce from a time, use mode "report" until then)`, *in.EnforceAt)
		case t.After(now.Add(maxScheduleAhead)):
			return nil, posture.Invalid("enforcement.enforceAt", "must be at most 10 years ahead", *in.EnforceAt)
		}
		e.EnforceAt = &t
	}
	return &e, nil
}

// staleRule validates maxAgeSeconds and onStale: an age of evidence in
// seconds (absent or 0: no limit) for the checks that judge reported
// evidence, and "deny" (the default) or "allow".
func staleRule(typ posture.CheckType, maxAge *int64, onStale *string) (int64, string, error) {
	age := deref(maxAge, 0)
	mode := strings.ToLower(strings.TrimSpace(deref(onStale, "")))
	switch {
	case age < 0:
		return 0, "", posture.Invalid("maxAgeSeconds", "must be 0 (no limit) or a positive number of seconds", age)
	case age > int64(maxScheduleAhead/time.Second):
		return 0, "", posture.Invalid("maxAgeSeconds", fmt.Sprintf("must be at most %d (10 years)", int64(maxScheduleAhead/time.Second)), age)
	case age > 0 && typ == posture.CheckMFA:
		return 0, "", posture.Invalid("maxAgeSeconds", "does not apply to MFA checks (use timeoutSeconds)", age)
	case mode != "" && mode != posture.OnStaleDeny && mode != posture.OnStaleAllow:
		return 0, "", posture.Invalid("onStale", `must be "deny" or "allow"`, deref(onStale, ""))
	case age == 0:
		return 0, "", nil
	case mode == "":
		mode = posture.OnStaleDeny
	}
	return age, mode, nil
}

func operatingSystems(in []osInput) ([]posture.OperatingSystem, error) {
	if len(in) == 0 {
		return nil, posture.Invalid("operatingSystems", "at least one operating system is required", in)
	}
	out := make([]posture.OperatingSystem, 0, len(in))
	for i, o := range in {
		t, ok := posture.CanonicalOSType(o.Type)
		if !ok {
			return nil, posture.Invalid(fmt.Sprintf("operatingSystems[%d].type", i),
				"must be one of "+strings.Join(posture.OSTypes, ", "), o.Type)
		}
		versions := make([]string, 0, len(o.Versions))
		for j, v := range o.Versions {
			if _, err := evaluator.ParseVersionRange(v); err != nil {
				return nil, posture.Invalid(fmt.Sprintf("operatingSystems[%d].versions[%d]", i, j),
					"must be a valid semver version or range: "+err.Error(), v)
			}
			if evaluator.NegatesEveryVersion(v) {
				return nil, posture.Invalid(fmt.Sprintf("operatingSystems[%d].versions[%d]", i, j),
					"a negated wildcard (!=*) matches every version but 0.0.0; to refuse an operating system, leave it out of the check", v)
			}
			versions = append(versions, strings.TrimSpace(v))
		}
		out = append(out, posture.OperatingSystem{Type: t, Versions: versions})
	}
	return out, nil
}

// macAddresses accepts hardware addresses of 48 or 64 bits (EUI-48, EUI-64:
// 12 or 16 hex digits) in any separator style (":", "-", ".", none).
func macAddresses(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, posture.Invalid("macAddresses", "at least one MAC address is required", in)
	}
	out := make([]string, 0, len(in))
	for i, m := range in {
		clean := strings.Map(func(r rune) rune {
			if r == ':' || r == '-' || r == '.' {
				return -1
			}
			return r
		}, strings.TrimSpace(m))
		if len(clean) != 12 && len(clean) != 16 || !isHex(clean) {
			return nil, posture.Invalid(fmt.Sprintf("macAddresses[%d]", i), "must be a MAC address: 12 hex digits (EUI-48) or 16 (EUI-64), optionally separated by :, - or .", m)
		}
		out = append(out, strings.TrimSpace(m))
	}
	return out, nil
}

func nonEmptyList(field string, in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, posture.Invalid(field, "at least one entry is required", in)
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		if strings.TrimSpace(s) == "" {
			return nil, posture.Invalid(fmt.Sprintf("%s[%d]", field, i), "must not be empty", s)
		}
		out = append(out, strings.TrimSpace(s))
	}
	return out, nil
}

func processSemantic(s string) (string, error) {
	switch strings.ToLower(s) {
	case "allof":
		return posture.AllOf, nil
	case "anyof", "oneof":
		return posture.AnyOf, nil
	case "":
		return "", posture.Invalid("semantic", "is required: AllOf, AnyOf or OneOf", nil)
	}
	return "", posture.Invalid("semantic", "must be AllOf, AnyOf or OneOf", s)
}

func processes(in []processInput) ([]posture.Process, error) {
	if len(in) == 0 {
		return nil, posture.Invalid("processes", "at least one process is required", in)
	}
	out := make([]posture.Process, 0, len(in))
	for i, p := range in {
		v, err := process(fmt.Sprintf("processes[%d]", i), p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func process(field string, in processInput) (posture.Process, error) {
	var p posture.Process
	osType := in.OSType
	if osType == "" {
		osType = in.OS
	} else if in.OS != "" && !strings.EqualFold(in.OS, osType) {
		return p, posture.Invalid(field+".os", "os and osType spell one field and differ: give one of them", in.OS)
	}
	t, ok := posture.CanonicalOSType(osType)
	if !ok {
		return p, posture.Invalid(field+".osType", "must be one of "+strings.Join(posture.OSTypes, ", "), osType)
	}
	p.OSType = t
	if p.Path = strings.TrimSpace(in.Path); p.Path == "" {
		return p, posture.Invalid(field+".path", "is required", in.Path)
	}
	// A client reports the path it is asked for, and a report must read
	// as it shows (client posture responses refuse the same characters).
	if err := api.CheckText(field+".path", p.Path); err != nil {
		return p, err
	}
	p.Hashes = []string{}
	for i, h := range in.Hashes {
		// SHA-256 (64 hex) or SHA-512 (128 hex): the C SDK, which
		// ziti-edge-tunnel uses, reports SHA-512.
		if (len(h) != 64 && len(h) != 128) || !isHex(h) {
			return p, posture.Invalid(fmt.Sprintf("%s.hashes[%d]", field, i), "must be a SHA-256 or SHA-512 hash: 64 or 128 hex characters", h)
		}
		p.Hashes = append(p.Hashes, strings.ToLower(h))
	}
	fps, fpField := in.SignerFingerprints, func(i int) string { return fmt.Sprintf("%s.signerFingerprints[%d]", field, i) }
	switch {
	case len(fps) == 0 && in.SignerFingerprint != "":
		fps, fpField = []string{in.SignerFingerprint}, func(int) string { return field + ".signerFingerprint" }
	case in.SignerFingerprint != "" && (len(fps) != 1 || !strings.EqualFold(fps[0], in.SignerFingerprint)):
		return p, posture.Invalid(field+".signerFingerprint", "signerFingerprint and signerFingerprints spell one field and differ: give one of them", in.SignerFingerprint)
	}
	p.SignerFingerprints = []string{}
	for i, f := range fps {
		if len(f) != 40 || !isHex(f) {
			return p, posture.Invalid(fpField(i), "must be a SHA-1 fingerprint: 40 hex characters", f)
		}
		p.SignerFingerprints = append(p.SignerFingerprints, strings.ToLower(f))
	}
	return p, nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return s != ""
}

// enforcementView is a check's enforcement as the API shows it; a check
// without one (enforced) has no enforcement field.
type enforcementView struct {
	Mode      string    `json:"mode"`
	EnforceAt *api.Time `json:"enforceAt"`
	Message   string    `json:"message,omitempty"`
}

type processView struct {
	OSType             string   `json:"osType"`
	Path               string   `json:"path"`
	Hashes             []string `json:"hashes"`
	SignerFingerprints []string `json:"signerFingerprints,omitempty"`
	SignerFingerprint  *string  `json:"signerFingerprint,omitempty"`
}

// checkView is a posture check as the API shows it: the common fields and
// those of its type.
func checkView(c posture.Check) any {
	v := map[string]any{
		"id": c.ID, "name": c.Name, "typeId": c.TypeID, "roleAttributes": c.RoleAttributes,
		"tags": c.Tags, "version": 1, "createdAt": api.Time(c.CreatedAt), "updatedAt": api.Time(c.UpdatedAt),
		"_links": api.SelfLink(string(posture.KindCheck), c.ID),
	}
	if c.MaxAgeSeconds > 0 {
		v["maxAgeSeconds"], v["onStale"] = c.MaxAgeSeconds, c.OnStale
	}
	if e := c.Enforcement; e != nil {
		ev := enforcementView{Mode: e.Mode, Message: e.Message}
		if e.EnforceAt != nil {
			at := api.Time(*e.EnforceAt)
			ev.EnforceAt = &at
		}
		v["enforcement"] = ev
	}
	switch c.TypeID {
	case posture.CheckOS:
		v["operatingSystems"] = c.OperatingSystems
	case posture.CheckMAC:
		v["macAddresses"] = c.MACAddresses
	case posture.CheckDomain:
		v["domains"] = c.Domains
	case posture.CheckProcess:
		if c.Process != nil {
			var fp *string
			if len(c.Process.SignerFingerprints) > 0 {
				fp = &c.Process.SignerFingerprints[0]
			}
			v["process"] = processView{OSType: c.Process.OSType, Path: c.Process.Path, Hashes: c.Process.Hashes, SignerFingerprint: fp}
		}
	case posture.CheckProcessMulti:
		ps := make([]processView, len(c.Processes))
		for i, p := range c.Processes {
			ps[i] = processView{OSType: p.OSType, Path: p.Path, Hashes: p.Hashes, SignerFingerprints: p.SignerFingerprints}
		}
		v["semantic"] = c.Semantic
		v["processes"] = ps
	case posture.CheckMFA:
		v["timeoutSeconds"] = c.TimeoutSeconds
		v["promptOnWake"] = c.PromptOnWake
		v["promptOnUnlock"] = c.PromptOnUnlock
		v["ignoreLegacyEndpoints"] = c.IgnoreLegacyEndpoints
	}
	return v
}

// checkTypeNames are the posture check types and their names.
var checkTypeNames = []struct{ id, name string }{
	{"OS", "Operating System Check"},
	{"PROCESS", "Process Check"},
	{"DOMAIN", "Windows Domain Check"},
	{"MAC", "MAC Address Check"},
	{"PROCESS_MULTI", "Process Multi Check"},
	{"MFA", "MFA Check"},
}

type checkTypeView struct {
	ID               string                    `json:"id"`
	Name             string                    `json:"name"`
	OperatingSystems []posture.OperatingSystem `json:"operatingSystems"`
	Version          *string                   `json:"version"`
	CreatedAt        api.Time                  `json:"createdAt"`
	UpdatedAt        api.Time                  `json:"updatedAt"`
	Tags             posture.Tags              `json:"tags"`
	Links            api.Links                 `json:"_links"`
}

func checkTypeViews() []checkTypeView {
	oses := make([]posture.OperatingSystem, len(posture.OSTypes))
	for i, t := range posture.OSTypes {
		oses[i] = posture.OperatingSystem{Type: t, Versions: []string{}}
	}
	out := make([]checkTypeView, len(checkTypeNames))
	for i, t := range checkTypeNames {
		out[i] = checkTypeView{ID: t.id, Name: t.name, OperatingSystems: oses, Tags: posture.Tags{},
			CreatedAt: api.Time(api.BuiltinTime), UpdatedAt: api.Time(api.BuiltinTime),
			Links: api.SelfLink("posture-check-types", t.id)}
	}
	return out
}

func (a *API) listCheckTypes(c echo.Context) error { return api.List(c, checkTypeViews()) }

func (a *API) detailCheckType(c echo.Context) error {
	for _, t := range checkTypeViews() {
		if t.ID == strings.ToUpper(c.Param("id")) {
			return api.OK(c, t)
		}
	}
	return posture.NotFound("posture check type", c.Param("id"))
}

func (a *API) checkRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/posture-check-types", Access: api.Admin, Handler: a.listCheckTypes},
		{Method: http.MethodGet, Path: "/posture-check-types/:id", Access: api.Admin, Handler: a.detailCheckType},
	}
}
