package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Stater is what the dashboard asks a listener for: a
// [*azdispatch.Listener] of any message type is one. A Stater that also
// has a Ready method, as [azdispatch.Listener.Ready], is shown as stopped
// once it says it is not running; without one, the page cannot tell a
// stopped listener from an idle one that runs no dequeuer, and says so.
type Stater interface {
	State() azdispatch.State
}

// StateFunc makes a function a [Stater].
type StateFunc func() azdispatch.State

// State calls f.
func (f StateFunc) State() azdispatch.State { return f() }

// readier is the part of a [*azdispatch.Listener] that tells a running
// listener from a stopped one: [azdispatch.State] does not say.
type readier interface {
	Ready() error
}

// registry holds the listeners a service registered, by name.
type registry struct {
	mu    sync.Mutex
	names []string
	by    map[string]*registered
}

// registered is one listener and the samples of its throughput.
type registered struct {
	l    Stater
	rate rateSamples
}

// Register shows a listener running in this process under name on the
// listeners and latency pages: its live [azdispatch.State], read when a
// page is viewed (it costs no request). Registering a name again replaces
// it (and starts its throughput afresh); a nil l removes it.
func (h *Handler) Register(name string, l Stater) {
	var r *registered
	if l != nil {
		// Read before the lock: State is the caller's code.
		r = &registered{l: l}
		r.rate.add(h.opts.Now(), settled(l.State()))
	}
	h.listeners.mu.Lock()
	defer h.listeners.mu.Unlock()
	if h.listeners.by == nil {
		h.listeners.by = map[string]*registered{}
	}
	_, had := h.listeners.by[name]
	switch {
	case l == nil:
		delete(h.listeners.by, name)
		h.listeners.names = slices.DeleteFunc(h.listeners.names, func(n string) bool { return n == name })
	default:
		h.listeners.by[name] = r
		if !had {
			h.listeners.names = append(h.listeners.names, name)
			slices.Sort(h.listeners.names)
		}
	}
}

// The states a listener is shown in.
const (
	stateRunning  = "running" // dequeuers receive, or handlers run
	stateIdle     = "idle"    // running, every dequeuer backing off (or none, waiting to be woken), nothing in flight
	stateStopped  = "stopped" // Run has returned, or was never called
	stateFatal    = "fatal"   // storage refuses it in a way retrying will not fix
	stateFailing  = "failing" // running, but receives fail in a row
	stateNoDeq    = "no dequeuer"
	notRunningEnd = ": not running" // how Listener.Ready ends when Run is not running
)

// listenerRow is one listener's state as the pages show it.
type listenerRow struct {
	Name    string
	S       azdispatch.State
	Busy    int
	State   string // one of the state constants
	Why     string // what the state rests on, when it is not plain
	Fatal   string
	Rate    string // settled messages per second, and over what
	Retries string // Retried by cause, the causes that happened
	Paused  string // the source's pause as the listener last read it; "" for none
}

// classify names the state a listener is in. A Ready method (a
// *azdispatch.Listener's) tells a stopped listener from a running one;
// without it a listener with no dequeuer and nothing in flight may be
// either.
func classify(l Stater, s azdispatch.State) (state, why string) {
	if s.Fatal != nil {
		return stateFatal, ""
	}
	if r, ok := l.(readier); ok {
		if err := r.Ready(); err != nil {
			// Ready's only words for "Run is not running": State has no
			// field for it. A listener test pins them.
			if errors.Is(err, azdispatch.ErrNotReady) && strings.HasSuffix(err.Error(), notRunningEnd) {
				return stateStopped, "Run is not running"
			}
			return stateFailing, cleanError(err)
		}
	} else if s.ActiveDequeuers == 0 && s.InFlight == 0 {
		return stateNoDeq, "stopped, or waiting to be woken: register the *azdispatch.Listener itself to tell which"
	}
	if s.InFlight == 0 && s.ActiveDequeuers == s.IdleDequeuers {
		if s.ActiveDequeuers == 0 {
			return stateIdle, "no dequeuer running: one starts when work is sent"
		}
		return stateIdle, ""
	}
	return stateRunning, ""
}

// retryCauses lists the causes of a listener's retries that happened, as
// "error 3, timeout 1"; "" when there were none.
func retryCauses(c azdispatch.RetryCounts) string {
	var parts []string
	for _, p := range []struct {
		name string
		n    int64
	}{{"error", c.Error}, {"panic", c.Panic}, {"timeout", c.Timeout}, {"storage", c.Storage}, {"poison move", c.Poison}} {
		if p.n > 0 {
			parts = append(parts, p.name+" "+itoa(p.n))
		}
	}
	return strings.Join(parts, ", ")
}

func (h *Handler) listenerRows() []listenerRow {
	now := h.opts.Now()
	h.listeners.mu.Lock()
	names := slices.Clone(h.listeners.names)
	rs := make([]*registered, len(names))
	for i, n := range names {
		rs[i] = h.listeners.by[n]
	}
	h.listeners.mu.Unlock()
	out := make([]listenerRow, len(names))
	for i, n := range names {
		s := rs[i].l.State() // outside the registry's lock: it is the user's code
		row := listenerRow{Name: n, S: s, Busy: s.ActiveDequeuers - s.IdleDequeuers, Retries: retryCauses(s.RetriedFor)}
		row.State, row.Why = classify(rs[i].l, s)
		if s.Fatal != nil {
			row.Fatal = "fatal since " + stamp(s.FatalSince) + ": " + cleanError(s.Fatal)
		}
		if s.Paused != (azdispatch.PauseState{}) {
			row.Paused = describePause(s.Paused) + ": receiving nothing"
		}
		h.listeners.mu.Lock()
		row.Rate = rs[i].rate.add(now, settled(s))
		h.listeners.mu.Unlock()
		out[i] = row
	}
	return out
}

// scopeNote is what the listeners and latency pages say of their figures:
// they are this process's, and a service runs many.
const scopeNote = "This page shows the listeners of this one process only: other instances of the service keep their own counts, which this page cannot see. For the whole fleet, read the listeners' OpenTelemetry metrics (package otelazdispatch) summed over every instance."

type listenersBody struct {
	Rows  []listenerRow
	Scope string
}

func (h *Handler) serveListeners(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "listeners", pageData{
		Title: "Listeners", Nav: "listeners", Write: h.writable(r), ReadAgo: "0 s",
		Body: listenersBody{Rows: h.listenerRows(), Scope: scopeNote},
	})
}

type latencyBody struct {
	Listeners []listenerRow
	Queues    []ovRow
	Target    time.Duration
	Scope     string
}

func (h *Handler) serveLatency(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.overview.get(r.Context())
	if err != nil {
		return
	}
	b := latencyBody{Listeners: h.listenerRows(), Target: h.opts.TargetAge, Scope: scopeNote}
	for _, s := range h.topo.sets {
		ur := aggregate(rd, s.units)
		b.Queues = append(b.Queues, ovRow{Name: s.name, Age: ur.Age,
			AgeOver: h.opts.TargetAge > 0 && ur.Age.OK && time.Duration(ur.Age.N) > h.opts.TargetAge})
	}
	h.render(w, r, http.StatusOK, "latency", pageData{
		Title: "Latency", Nav: "latency", Write: h.writable(r), ReadAgo: fmtDuration(h.since(at)), Body: b,
	})
}
