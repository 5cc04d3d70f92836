package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seed-0809debe/posture"
)

// DeadlineCounter counts the indexed deadlines (projections.Store
// implements it).
type DeadlineCounter interface {
	PendingDeadlines() (int, error)
}

// MetricsOptions configures NewMetrics.
type MetricsOptions struct {
	Progress  Progress
	State     LogStater
	Deadlines DeadlineCounter
	// Halt, when set, gives postured_bad_events_total and
	// postured_projection_halted_sequence.
	Halt *Halt
	// Disk, when set, gives postured_out_of_space and
	// postured_disk_free_bytes.
	Disk DiskStater
	// Timeout bounds reading the log's position at scrape time (default 2s).
	Timeout time.Duration
}

// Metrics are a node's Prometheus series, in a registry of their own (so
// that several nodes can live in one process, as they do in tests):
//
//   - postured_http_requests_total{method,route,status} and
//     postured_http_request_duration_seconds{method,route}: counted by
//     Middleware; route is echo's route pattern, "unmatched" for no route.
//   - postured_append_duration_seconds{op,result}: appends to the log
//     through the Log returned by Log, retries included; result
//     out_of_space counts the appends refused for lack of disk space.
//   - postured_failed_service_requests_total{check_type}: session requests
//     refused for posture by this node, once per failing check type.
//   - postured_would_deny_total{check_id}: sessions granted by this node
//     only because failing checks are report-only, once per such check.
//   - read at scrape time: postured_log_last_sequence,
//     postured_consumer_position (the last sequence the projection applied),
//     postured_projection_lag_events, postured_projection_lag_seconds,
//     postured_deadline_queue_length and postured_log_up.
//   - with a Halt: postured_bad_events_total and
//     postured_projection_halted_sequence.
//   - with Disk: postured_out_of_space{part} (1 while the log or the
//     projection refuses or holds writes for lack of space) and
//     postured_disk_free_bytes{part}.
//   - the Go runtime and process collectors.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	appends   *prometheus.HistogramVec
	failed    *prometheus.CounterVec
	wouldDeny *prometheus.CounterVec
	handler   http.Handler
	// byRequest caches the series of each method, route and status seen
	// (a requestKey to its requestSeries), so that a request costs no
	// label lookup.
	byRequest sync.Map
}

type requestKey struct {
	method, route string
	status        int
}

type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// NewMetrics registers the series.
func NewMetrics(opts MetricsOptions) *Metrics {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postured_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "postured_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by method and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route"}),
		appends: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "postured_append_duration_seconds",
			Help:    "Time until the log acknowledged an append (retries included), by operation (append, append_if_last) and result (ok, conflict, error).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"op", "result"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postured_failed_service_requests_total",
			Help: "Session requests refused for posture by this node, by the type of a failing check (a request failing several types counts once for each).",
		}, []string{"check_type"}),
		wouldDeny: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "postured_would_deny_total",
			Help: "Sessions granted by this node only because failing posture checks are report-only (would-denies), by report-only check id (a request failing several counts once for each).",
		}, []string{"check_id"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.appends, m.failed, m.wouldDeny,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if opts.Disk != nil {
		m.reg.MustRegister(newDiskCollector(opts.Disk))
	}
	if h := opts.Halt; h != nil {
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "postured_bad_events_total",
				Help: "Messages of the log that are not events at which this node's projection stopped (each counted once).",
			}, func() float64 { return float64(h.Total()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "postured_projection_halted_sequence",
				Help: "The sequence of the message that is not an event the projection is stopped at, waiting for an operator's decision (0: not stopped).",
			}, func() float64 { seq, _ := h.At(); return float64(seq) }),
		)
	}
	if opts.Progress != nil && opts.State != nil {
		m.reg.MustRegister(newProgressCollector(opts))
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// Registry is the registry of the series (for tests and extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler is GET /metrics in the Prometheus text format.
func (m *Metrics) Handler(c echo.Context) error {
	m.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// Middleware counts requests by route pattern and final status (the one the
// error handler gives an error).
func (m *Metrics) Middleware(e *echo.Echo) echo.MiddlewareFunc {
	var once sync.Once
	routes := map[[2]string]bool{} // method and path: no key to build per request
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				// The error handler writes the response now (and not
				// again later), so the status counted is the one sent.
				c.Error(err)
			}
			status := c.Response().Status
			once.Do(func() {
				for _, r := range e.Routes() {
					routes[[2]string{r.Method, r.Path}] = true
				}
			})
			method := c.Request().Method
			route := c.Path()
			if !routes[[2]string{method, route}] {
				route = "unmatched"
			}
			m.observe(method, route, status, start)
			return err
		}
	}
}

// observe counts and times one request answered.
func (m *Metrics) observe(method, route string, status int, start time.Time) {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions:
	default:
		method = "other"
	}
	k := requestKey{method, route, status}
	v, ok := m.byRequest.Load(k)
	if !ok {
		v, _ = m.byRequest.LoadOrStore(k, requestSeries{
			count:    m.requests.WithLabelValues(method, route, strconv.Itoa(status)),
			duration: m.duration.WithLabelValues(method, route),
		})
	}
	series := v.(requestSeries)
	series.count.Inc()
	series.duration.Observe(time.Since(start).Seconds())
}

// Wrap counts and times the requests a handler outside echo answers (the
// console), as Middleware does the APIs', under one route label.
func (m *Metrics) Wrap(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.observe(r.Method, route, sw.status, start)
	})
}

// statusWriter keeps the status a handler sent. Unwrap lets
// http.ResponseController reach the connection's writer.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Log wraps l so that appends are timed and refused session requests are
// counted by check type.
func (m *Metrics) Log(l Log) Log { return &meteredLog{Log: l, m: m} }

type meteredLog struct {
	Log
	m *Metrics
}

func (l *meteredLog) Append(ctx context.Context, e posture.Event) (uint64, error) {
	start := time.Now()
	seq, err := l.Log.Append(ctx, e)
	l.m.appended("append", e, start, err)
	return seq, err
}

func (l *meteredLog) AppendIfLast(ctx context.Context, e posture.Event, last uint64) (uint64, error) {
	start := time.Now()
	seq, err := l.Log.AppendIfLast(ctx, e, last)
	l.m.appended("append_if_last", e, start, err)
	return seq, err
}

func (m *Metrics) appended(op string, e posture.Event, start time.Time, err error) {
	result := "ok"
	switch {
	case posture.CodeOf(err) == posture.CodeConflict:
		result = "conflict"
	case errors.Is(err, posture.ErrOutOfSpace):
		result = "out_of_space"
	case err != nil:
		result = "error"
	}
	m.appends.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
	if err == nil && e.Type == posture.TypeSessionCreated && bytes.Contains(e.Data, []byte(`"wouldDeny"`)) {
		m.countWouldDeny(e)
		return
	}
	if err != nil || e.Type != posture.TypeSessionDenied {
		return
	}
	var denied posture.SessionDenied
	if json.Unmarshal(e.Data, &denied) != nil {
		return
	}
	seen := map[posture.CheckType]bool{}
	for _, f := range denied.PolicyFailures {
		for _, c := range f.Checks {
			if !c.ReportOnly && !seen[c.PostureCheckType] {
				seen[c.PostureCheckType] = true
				m.failed.WithLabelValues(string(c.PostureCheckType)).Inc()
			}
		}
	}
}

// countWouldDeny counts a session.created event's would-deny once per
// report-only check.
func (m *Metrics) countWouldDeny(e posture.Event) {
	var created posture.SessionCreated
	if json.Unmarshal(e.Data, &created) != nil {
		return
	}
	seen := map[string]bool{}
	for _, f := range created.WouldDeny {
		for _, c := range f.Checks {
			if c.ReportOnly && !seen[c.PostureCheckID] {
				seen[c.PostureCheckID] = true
				m.wouldDeny.WithLabelValues(c.PostureCheckID).Inc()
			}
		}
	}
}

// progressCollector reads the projection's progress and the log's position
// at scrape time.
type progressCollector struct {
	opts                                                            MetricsOptions
	up, last, position, lagEvents, lagSeconds, deadlineLen, missing *prometheus.Desc
}

func newProgressCollector(opts MetricsOptions) *progressCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &progressCollector{
		opts:        opts,
		up:          d("postured_log_up", "1 if the log's position could be read at scrape time, else 0."),
		last:        d("postured_log_last_sequence", "Sequence of the newest event in the log."),
		position:    d("postured_consumer_position", "Sequence of the last event this node's projection consumer applied."),
		lagEvents:   d("postured_projection_lag_events", "Events in the log that this node's projection has not applied yet."),
		lagSeconds:  d("postured_projection_lag_seconds", "Log time between the newest event stored and the newest event applied (0 when caught up)."),
		deadlineLen: d("postured_deadline_queue_length", "Posture deadlines indexed by the projection and not reached yet."),
		missing:     d("postured_log_missing_messages", "Messages missing from the log: deleted, damaged on disk and dropped by the NATS server, or lost with its start (0 unless something is wrong: run postured audit verify)."),
	}
}

func (p *progressCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{p.up, p.last, p.position, p.lagEvents, p.lagSeconds, p.deadlineLen, p.missing} {
		ch <- d
	}
}

func (p *progressCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	gauge(p.position, float64(p.opts.Progress.Cursor()))
	if p.opts.Deadlines != nil {
		if n, err := p.opts.Deadlines.PendingDeadlines(); err == nil {
			gauge(p.deadlineLen, float64(n))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.Timeout)
	defer cancel()
	st, err := p.opts.State(ctx)
	if err != nil {
		gauge(p.up, 0)
		return
	}
	gauge(p.up, 1)
	l := lag(p.opts.Progress, st)
	gauge(p.last, float64(st.LastSeq))
	gauge(p.missing, float64(st.Missing))
	gauge(p.lagEvents, float64(l.Events))
	gauge(p.lagSeconds, l.Seconds)
}

// diskCollector reads the disks of the node's parts at scrape time.
type diskCollector struct {
	disk       DiskStater
	full, free *prometheus.Desc
}

func newDiskCollector(disk DiskStater) *diskCollector {
	return &diskCollector{
		disk: disk,
		full: prometheus.NewDesc("postured_out_of_space", "1 while the part (log, projection) refuses or holds writes for lack of disk space, else 0.", []string{"part"}, nil),
		free: prometheus.NewDesc("postured_disk_free_bytes", "Bytes free on the file system of the part (log, projection).", []string{"part"}, nil),
	}
}

func (d *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.full
	ch <- d.free
}

func (d *diskCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range d.disk() {
		full := 0.0
		if s.Full {
			full = 1
		}
		ch <- prometheus.MustNewConstMetric(d.full, prometheus.GaugeValue, full, s.Part)
		if s.Free >= 0 {
			ch <- prometheus.MustNewConstMetric(d.free, prometheus.GaugeValue, float64(s.Free), s.Part)
		}
	}
}
