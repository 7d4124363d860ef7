package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/redact"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Checker is anything that can say whether it is doing its work: a
// *[azdispatch.Listener][T] of any T is one, so a single [Health] serves
// listeners of different message types. Ready is called on every probe, so
// it must be quick and make no request; a Listener's makes none.
type Checker interface {
	// Ready returns nil when ready, and otherwise an error that says why.
	Ready() error
}

// CheckerFunc adapts a function to [Checker], for readiness conditions of
// the process's own (a cache warmed, a dependency reached).
type CheckerFunc func() error

// Ready calls f.
func (f CheckerFunc) Ready() error { return f() }

// HealthOptions configures a [Health]. Nil, or a zero field, means the
// documented default.
type HealthOptions struct {
	// Logger receives a line each time a check turns not ready (with the
	// reason the probe shows) or ready again, and when a run given to
	// [Health.Run] fails. Defaults to none.
	Logger *slog.Logger
}

// Health serves Kubernetes readiness and liveness probes for the listeners
// (and anything else) of a process. Create one with [NewHealth], register
// checks with [Health.Add], run long-lived components through [Health.Run],
// and mount [Health.Readiness] and [Health.Liveness], conventionally at
// /readyz and /livez.
//
// Readiness answers 200 while every check is ready and 503 otherwise, with a
// small JSON body naming each check and why it is not ready. A Listener is
// not ready when it is not running, while a fatal storage error stands (a
// refused credential, a deleted queue), or after several failed receives in
// a row (see [azdispatch.Listener.Ready]); it turns ready again with the first receive
// that succeeds. The reasons are error texts with every URL's query string
// and user information removed and SAS signatures and account keys blanked,
// so a probe never shows a credential; still, mount the probes where only
// the cluster can reach them.
//
// Liveness answers 503 only when a component given to Run has returned an
// error while its context was still live: it gave up (a Listener's
// [azdispatch.ListenerOptions.FatalTimeout] ran out) and nothing in the
// process will start it again, so only a restart brings the work back. A
// storage outage or a refused credential never fails liveness, because
// restarting the pod fixes neither and a crash loop only delays recovery:
// readiness reports them. Otherwise liveness answers 200, which shows at
// least that the process still serves HTTP.
//
// A Health is safe for concurrent use.
type Health struct {
	log *slog.Logger

	mu     sync.Mutex
	checks []*healthCheck
	runs   []*healthRun
}

// healthCheck is a registered Checker and what the probes last saw of it,
// so that a change is logged once and the body says since when a check has
// failed.
type healthCheck struct {
	name     string
	c        Checker
	failing  bool
	since    time.Time // when a probe first saw it failing
	degraded bool      // the last probe found part of it out
}

// healthRun is a component run through Health.Run.
type healthRun struct {
	name    string
	running bool
	err     error // the error it gave up with; nil while running or after a clean return
	at      time.Time
}

// NewHealth returns a Health with no checks. Nil opts means defaults.
func NewHealth(opts *HealthOptions) *Health {
	h := &Health{log: slog.New(slog.DiscardHandler)}
	if opts != nil && opts.Logger != nil {
		h.log = opts.Logger
	}
	return h
}

// Add registers c under name (a queue's or a listener's, as the probe body
// should show it) for readiness. It panics if c is nil, name is empty or
// name is already registered, as [http.ServeMux] does for a bad pattern:
// these are mistakes in the program, not conditions to handle.
func (h *Health) Add(name string, c Checker) {
	if name == "" || c == nil {
		panic("azdispatch: Health.Add needs a name and a Checker")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hc := range h.checks {
		if hc.name == name {
			panic(fmt.Sprintf("azdispatch: Health.Add: %q is already registered", name))
		}
	}
	h.checks = append(h.checks, &healthCheck{name: name, c: c})
}

// Run calls run(ctx) and returns what it returns, recording the outcome
// under name for liveness: while it runs, and after it returns nil or
// returns once ctx has ended (a shutdown), name is live; if it returns an
// error while ctx is still live, it gave up, and [Health.Liveness] fails
// until Run is called again with the same name (a supervisor loop that
// restarts the component heals liveness). Typically run is a Listener's Run:
//
//	go func() { errs <- health.Run(ctx, "orders", listener.Run) }()
func (h *Health) Run(ctx context.Context, name string, run func(context.Context) error) error {
	r := h.startRun(name)
	err := run(ctx)
	gaveUp := err != nil && ctx.Err() == nil
	h.mu.Lock()
	r.running, r.at = false, time.Now()
	if gaveUp {
		r.err = err
	}
	h.mu.Unlock()
	if gaveUp {
		h.log.Error("a component gave up: liveness fails until it runs again", "name", name, "err", redactedError(err))
	}
	return err
}

// startRun records that name runs now, replacing an earlier record.
func (h *Health) startRun(name string) *healthRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := &healthRun{name: name, running: true, at: time.Now()}
	for i, old := range h.runs {
		if old.name == name {
			h.runs[i] = r
			return r
		}
	}
	h.runs = append(h.runs, r)
	return r
}

// Ready returns nil when every check is ready, and otherwise an error
// matching [azdispatch.ErrNotReady] that joins the reasons, redacted as the
// probe shows them. It lets a Health be a [Checker] itself.
func (h *Health) Ready() error {
	return reportError(h.readiness(time.Now()), azdispatch.ErrNotReady)
}

// Live returns nil unless a component given to [Health.Run] has given up (see
// [Health]); then an error naming it.
func (h *Health) Live() error {
	return reportError(h.liveness(), errNotLive)
}

// errNotLive is the sentinel of Live's error; it is not exported because
// nothing but the probe needs to tell it apart.
var errNotLive = errors.New("azdispatch: not live")

// Readiness returns the readiness probe's handler: 200 when every check is
// ready, 503 when one is not, with a JSON body such as
//
//	{"status":"not ready","checks":[
//	  {"name":"orders","ready":true,
//	   "degraded":"azdispatch: orders: 1 of 4 shards out: shard \"orders-1\" out since …: no answer within 2s …"},
//	  {"name":"billing","ready":false,"since":"2025-01-02T15:04:05Z",
//	   "reason":"azdispatch: not ready: fatal storage error since …: 403 AuthenticationFailed"}]}
//
// A check that is ready with part of it out (a [Degrader]: a listener over
// a sharded queue one of whose accounts does not answer) says what in
// "degraded", and the answer stays 200.
//
// With no checks it answers 200. It serves GET and HEAD; other methods get 405.
func (h *Health) Readiness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveReport(w, r, h.readiness(time.Now()), "ready", "not ready")
	})
}

// Liveness returns the liveness probe's handler: 200 unless a component
// given to [Health.Run] has given up (see [Health]), then 503, with a JSON
// body such as
//
//	{"status":"live","checks":[{"name":"orders","live":true}]}
//
// It serves GET and HEAD; other methods get 405.
func (h *Health) Liveness() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveReport(w, r, h.liveness(), "live", "not live")
	})
}

// checkReport is one check's line in a probe's body.
type checkReport struct {
	Name   string     `json:"name"`
	Ready  *bool      `json:"ready,omitempty"`
	Live   *bool      `json:"live,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Reason string     `json:"reason,omitempty"`
	// Degraded says what is out while the check is still ready: a
	// sharded queue's shards that do not answer (see Degrader).
	Degraded string `json:"degraded,omitempty"`
	// Paused is the pause a listener holds for (see PauseReporter): a
	// state, not a failure.
	Paused *pausedReport `json:"paused,omitempty"`
}

// PauseReporter is a [Checker] that can be paused: a
// *[azdispatch.Listener] on a [azdispatch.Pauser]. While its pause holds,
// the readiness probe shows it in the check's "paused" field (until when,
// by whom) and stays 200: a pod that waits out a pause is doing what it
// was told, and taking it out of service would change nothing.
type PauseReporter interface {
	// Paused returns the pause as last read, and whether it holds now. It
	// must be quick and make no request.
	Paused() (azdispatch.PauseState, bool)
}

// Degrader is a [Checker] that can be ready with part of it out: a
// *[azdispatch.ShardedQueue], and a *[azdispatch.Listener] over one, whose
// other shards still serve. The readiness probe shows what Degraded says
// in the check's "degraded" field, and stays 200: a pod that still does its
// work is not taken out of service for a shard it routes around.
type Degrader interface {
	// Degraded returns nil when nothing is out, and otherwise an error
	// that says what and why. It must be quick and make no request.
	Degraded() error
}

func (c checkReport) ok() bool {
	return (c.Ready == nil || *c.Ready) && (c.Live == nil || *c.Live)
}

// healthReport is a probe's body.
type healthReport struct {
	Status string        `json:"status"`
	Checks []checkReport `json:"checks"`
}

// readiness asks every check, outside the lock (a Checker of the user's may
// be slow), and records and logs what changed.
func (h *Health) readiness(now time.Time) []checkReport {
	h.mu.Lock()
	checks := append([]*healthCheck(nil), h.checks...)
	h.mu.Unlock()
	out := make([]checkReport, len(checks))
	for i, hc := range checks {
		err := hc.c.Ready()
		ready := err == nil
		out[i] = checkReport{Name: hc.name, Ready: &ready}
		if err != nil {
			out[i].Reason = redactedError(err)
		} else if d, ok := hc.c.(Degrader); ok {
			if err := d.Degraded(); err != nil {
				out[i].Degraded = redactedError(err)
			}
		}
		if p, ok := hc.c.(PauseReporter); ok && ready {
			if st, on := p.Paused(); on {
				out[i].Paused = &pausedReport{Until: st.Until.UTC(), By: st.By}
			}
		}
		h.mu.Lock()
		switch {
		case !ready && !hc.failing:
			hc.failing, hc.since = true, now
			h.log.Warn("not ready", "name", hc.name, "reason", out[i].Reason)
		case ready && hc.failing:
			hc.failing = false
			h.log.Info("ready again", "name", hc.name, "after", now.Sub(hc.since).Round(time.Millisecond))
		}
		switch degraded := out[i].Degraded != ""; {
		case degraded && !hc.degraded:
			hc.degraded = true
			h.log.Warn("degraded: ready, with part of it out", "name", hc.name, "degraded", out[i].Degraded)
		case !degraded && hc.degraded:
			hc.degraded = false
			h.log.Info("no longer degraded", "name", hc.name)
		}
		if hc.failing {
			since := hc.since.UTC()
			out[i].Since = &since
		}
		h.mu.Unlock()
	}
	return out
}

func (h *Health) liveness() []checkReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]checkReport, len(h.runs))
	for i, r := range h.runs {
		live := r.err == nil
		out[i] = checkReport{Name: r.name, Live: &live}
		if !live {
			at := r.at.UTC()
			out[i].Since, out[i].Reason = &at, redactedError(r.err)
		}
	}
	return out
}

// reportError joins the reasons of the failing checks under sentinel.
func reportError(checks []checkReport, sentinel error) error {
	var errs []error
	for _, c := range checks {
		if !c.ok() {
			errs = append(errs, fmt.Errorf("%s: %s", c.Name, c.Reason))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", sentinel, errors.Join(errs...))
}

// serveReport writes a probe's answer: 200 with status ok, or 503 with
// status bad, and the checks as JSON.
func serveReport(w http.ResponseWriter, r *http.Request, checks []checkReport, ok, bad string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rep, code := healthReport{Status: ok, Checks: checks}, http.StatusOK
	for _, c := range checks {
		if !c.ok() {
			rep.Status, code = bad, http.StatusServiceUnavailable
			break
		}
	}
	if rep.Checks == nil {
		rep.Checks = []checkReport{}
	}
	writeJSON(w, r, code, rep)
}

// writeJSON writes v as the JSON body of a response that no cache between
// here and the prober may keep: a probe must see the state now.
func writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "azdispatch: encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// maxReason bounds a reason in a probe's body: a joined error can be long,
// and a probe's body should stay small.
const maxReason = 1024

// redactedError is err's text with credentials removed: every URL loses its
// query, fragment and user information, and key=value credentials their
// value. The package's own errors already leave SAS tokens out (see
// StorageError); this covers errors of other origins too.
func redactedError(err error) string {
	s := redact.Secrets(redact.URLs(err.Error()))
	if len(s) > maxReason {
		s = xmltext.TruncateUTF8(s, maxReason) + "…"
	}
	return s
}
