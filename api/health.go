package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// SystemPaths are the routes outside the two APIs: the Prometheus metrics
// and the liveness and readiness probes. They are public, are not rewritten
// to the client API, and are served by RegisterSystem.
var SystemPaths = []string{"/metrics", "/livez", "/readyz"}

// Progress is the projection's progress (projections.Store implements it).
type Progress interface {
	Cursor() uint64
	AppliedAt() time.Time
	WaitFor(ctx context.Context, seq uint64) error
	Err() error
}

// LogState is the position of the log.
type LogState struct {
	LastSeq             uint64
	FirstTime, LastTime time.Time // when the oldest and newest events were stored
	// Missing counts the messages missing from the log: deleted, dropped
	// as damaged by the NATS server, or lost with the log's start.
	Missing int
}

// LogStater reads the log's position (cmd adapts eventlog.Log.State).
type LogStater func(ctx context.Context) (LogState, error)

// DiskState is the disk of a part of the node (the log's store or the
// projection), as the probes and the metrics report it.
type DiskState struct {
	Part    string // "log" or "projection"
	Free    int64  // bytes free (-1 when unknown, as for an external log)
	Reserve int64  // bytes the part keeps free
	Full    bool   // the part refuses or holds writes for lack of space
	Reason  string // why, when Full
}

// DiskStater reports the disks of the node's parts.
type DiskStater func() []DiskState

// Lag is how far a projection is behind the log.
type Lag struct {
	Cursor  uint64
	LastSeq uint64
	Events  uint64
	Seconds float64
}

// lag compares the projection with the log: in events, and in seconds of
// log time between the newest event stored and the newest event applied.
func lag(p Progress, st LogState) Lag {
	l := Lag{Cursor: p.Cursor(), LastSeq: st.LastSeq}
	if l.Cursor >= l.LastSeq {
		return l
	}
	l.Events = l.LastSeq - l.Cursor
	since := p.AppliedAt()
	if since.IsZero() || l.Cursor == 0 {
		since = st.FirstTime
	}
	l.Seconds = max(0, st.LastTime.Sub(since).Seconds())
	return l
}

// Health answers the probes.
//
// Liveness is the process answering HTTP. Readiness is the projection being
// caught up with the log: the log's last sequence is read at the time of the
// check, and the node is ready if its projection applies it within Wait. A
// node that cannot reach the log, whose projection stopped on an error or
// at a message that is not an event, or that is still replaying a long log
// is not ready.
type Health struct {
	Progress Progress
	State    LogStater
	// Wait bounds how long readiness waits for the projection to reach the
	// log's end (default 1s); Timeout bounds reading the log's position
	// (default 2s).
	Wait    time.Duration
	Timeout time.Duration
	// Starting reports that the node does not serve its APIs yet (it
	// catches up before it builds them): not ready, whatever the
	// projection's position.
	Starting func() bool
	// Halt, when set, is where the projection is stopped at a message
	// that is not an event: not ready, and the reason names it.
	Halt *Halt
	// Disk, when set, makes a node whose log or projection is out of disk
	// space not ready, with the reason.
	Disk DiskStater
	// Altered, when set, says how the log differs from its signed
	// checkpoints ("": it does not, or that is not known).
	Altered func() string
}

// ReadyView is the body of /readyz.
type ReadyView struct {
	Ready      bool    `json:"ready"`
	Reason     string  `json:"reason,omitempty"`
	Cursor     uint64  `json:"cursor"`
	LastSeq    uint64  `json:"lastSequence"`
	LagEvents  uint64  `json:"lagEvents"`
	LagSeconds float64 `json:"lagSeconds"`
	// HaltedAt is the sequence of the message that is not an event the
	// projection is stopped at, if any.
	HaltedAt uint64 `json:"haltedAtSequence,omitempty"`
	// MissingMessages counts the messages missing from the log, and
	// Warning says what that means. The node stays ready: what it applied
	// before stands, but answers about the past rebuilt from the log may be
	// wrong.
	MissingMessages int    `json:"missingMessages,omitempty"`
	Warning         string `json:"warning,omitempty"`
	// LogAltered says how the log differs from its signed checkpoints, as
	// the node found when it rebuilt its projection from it. The node
	// stays ready.
	LogAltered string `json:"logAltered,omitempty"`
}

// knownNotReadyTimeout bounds reading the log's position for a node that
// is not ready for another reason.
const knownNotReadyTimeout = 250 * time.Millisecond

// Check reports readiness. Whatever the reason a node is not ready, the
// body gives the log's position and the lag when the log answers
// (lastSequence is 0 only when it does not).
func (h *Health) Check(ctx context.Context) ReadyView {
	timeout, wait := h.Timeout, h.Wait
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	if wait <= 0 {
		wait = time.Second
	}
	// A node known not to be ready (its projection stopped, a disk full)
	// asks the log for its position only briefly: the answer is 503 either
	// way, and a probe must not wait for it.
	known := ""
	if err := h.Progress.Err(); err != nil {
		known = "the projection stopped: " + err.Error()
	} else if h.Disk != nil {
		for _, d := range h.Disk() {
			if d.Full {
				known = d.Reason
				break
			}
		}
	}
	if known != "" {
		timeout = min(timeout, knownNotReadyTimeout)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	st, stErr := h.State(sctx)
	cancel()
	notReady := func(reason string) ReadyView {
		if stErr != nil {
			return ReadyView{Reason: reason, Cursor: h.Progress.Cursor()}
		}
		l := lag(h.Progress, st)
		return ReadyView{Reason: reason, Cursor: l.Cursor, LastSeq: st.LastSeq, LagEvents: l.Events, LagSeconds: l.Seconds}
	}
	if known != "" {
		return notReady(known)
	}
	if stErr != nil {
		return notReady("the log is unreachable")
	}
	if h.Halt != nil {
		if seq, reason := h.Halt.describe(); seq != 0 {
			v := notReady(reason)
			v.HaltedAt = seq
			return v
		}
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	err := h.Progress.WaitFor(wctx, st.LastSeq)
	cancel()
	l := lag(h.Progress, st)
	v := ReadyView{Ready: err == nil, Cursor: l.Cursor, LastSeq: st.LastSeq, LagEvents: l.Events, LagSeconds: l.Seconds}
	if st.Missing > 0 {
		v.MissingMessages, v.Warning = st.Missing, MissingWarning(st.Missing)
	}
	if h.Altered != nil {
		v.LogAltered = h.Altered()
	}
	switch {
	case err != nil:
		v.Reason = "the projection is catching up with the log"
	case h.Starting != nil && h.Starting():
		v.Ready, v.Reason = false, "starting: the APIs are not served yet"
	}
	return v
}

// Live is GET /livez.
func (h *Health) Live(c echo.Context) error {
	return OK(c, map[string]bool{"alive": true})
}

// Ready is GET /readyz: 200 when ready, 503 otherwise, with the figures.
func (h *Health) Ready(c echo.Context) error {
	v := h.Check(c.Request().Context())
	status := http.StatusOK
	if !v.Ready {
		status = http.StatusServiceUnavailable
	}
	return c.JSON(status, Envelope{Data: v})
}

// RegisterSystem serves SystemPaths on e, outside the two APIs, for GET
// and HEAD (as Mount does).
func RegisterSystem(e *echo.Echo, m *Metrics, h *Health) {
	for path, handler := range map[string]echo.HandlerFunc{"/metrics": m.Handler, "/livez": h.Live, "/readyz": h.Ready} {
		e.GET(path, handler)
		e.HEAD(path, handler)
	}
}

// MissingWarning says what messages missing from the log mean, and what
// to do.
func MissingWarning(n int) string {
	what := fmt.Sprintf("%d messages are", n)
	if n == 1 {
		what = "1 message is"
	}
	return what + " missing from the log (deleted, damaged on disk and dropped by the NATS server, or lost with its start): " +
		"answers about the past rebuilt from the log may be wrong; run postured audit verify"
}
