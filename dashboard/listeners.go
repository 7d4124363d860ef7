package dashboard

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Stater is what the dashboard asks a listener for: a
// [*azdispatch.Listener] of any message type is one.
type Stater interface {
	State() azdispatch.State
}

// StateFunc makes a function a [Stater].
type StateFunc func() azdispatch.State

// State calls f.
func (f StateFunc) State() azdispatch.State { return f() }

// registry holds the listeners a service registered, by name.
type registry struct {
	mu    sync.Mutex
	names []string
	by    map[string]Stater
}

// Register shows a listener running in this process under name on the
// listeners and latency pages: its live [azdispatch.State], read when a
// page is viewed (it costs no request). Registering a name again replaces
// it; a nil l removes it.
func (h *Handler) Register(name string, l Stater) {
	h.listeners.mu.Lock()
	defer h.listeners.mu.Unlock()
	if h.listeners.by == nil {
		h.listeners.by = map[string]Stater{}
	}
	_, had := h.listeners.by[name]
	switch {
	case l == nil:
		delete(h.listeners.by, name)
		h.listeners.names = slices.DeleteFunc(h.listeners.names, func(n string) bool { return n == name })
	default:
		h.listeners.by[name] = l
		if !had {
			h.listeners.names = append(h.listeners.names, name)
			slices.Sort(h.listeners.names)
		}
	}
}

// listenerRow is one listener's state as the pages show it.
type listenerRow struct {
	Name  string
	S     azdispatch.State
	Busy  int
	Fatal string
}

func (h *Handler) listenerRows() []listenerRow {
	h.listeners.mu.Lock()
	names := slices.Clone(h.listeners.names)
	ls := make([]Stater, len(names))
	for i, n := range names {
		ls[i] = h.listeners.by[n]
	}
	h.listeners.mu.Unlock()
	out := make([]listenerRow, len(names))
	for i, n := range names {
		s := ls[i].State()
		out[i] = listenerRow{Name: n, S: s, Busy: s.ActiveDequeuers - s.IdleDequeuers}
		if s.Fatal != nil {
			out[i].Fatal = "fatal since " + stamp(s.FatalSince) + ": " + cleanError(s.Fatal)
		}
	}
	return out
}

func (h *Handler) serveListeners(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "listeners", pageData{
		Title: "Listeners", Nav: "listeners", Write: h.writable(r), ReadAgo: "0 s", Body: h.listenerRows(),
	})
}

type latencyBody struct {
	Listeners []listenerRow
	Queues    []ovRow
	Target    time.Duration
}

func (h *Handler) serveLatency(w http.ResponseWriter, r *http.Request) {
	rd, at, err := h.overview.get(r.Context())
	if err != nil {
		return
	}
	b := latencyBody{Listeners: h.listenerRows(), Target: h.opts.TargetAge}
	for _, s := range h.topo.sets {
		ur := aggregate(rd, s.units)
		b.Queues = append(b.Queues, ovRow{Name: s.name, Age: ur.Age,
			AgeOver: h.opts.TargetAge > 0 && ur.Age.OK && time.Duration(ur.Age.N) > h.opts.TargetAge})
	}
	h.render(w, r, http.StatusOK, "latency", pageData{
		Title: "Latency", Nav: "latency", Write: h.writable(r), ReadAgo: fmtDuration(h.since(at)), Body: b,
	})
}
