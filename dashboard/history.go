package dashboard

import (
	"sync"
	"time"
)

// sample is one reading of a series; ok is false where the reading failed,
// so that a sparkline shows a gap rather than a false zero.
type sample struct {
	at time.Time
	v  float64
	ok bool
}

// history keeps the samples of every series (a queue's depth, a shard's
// oldest age, …) for the last hour, in process: a ring per series. It is
// filled by the readings viewers cause, so it costs no request of its own,
// and has gaps where nobody looked.
type history struct {
	mu     sync.Mutex
	size   int
	series map[string]*ring
}

type ring struct {
	buf  []sample
	next int
	full bool
}

func newHistory(cacheFor time.Duration) *history {
	// One reading per cacheFor at most: an hour's worth, and one more.
	size := int(window/cacheFor) + 1
	return &history{size: min(max(size, 2), 3600), series: map[string]*ring{}}
}

// add records a sample of series key.
func (h *history) add(key string, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.series[key]
	if r == nil {
		r = &ring{buf: make([]sample, h.size)}
		h.series[key] = r
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// since returns the samples of key taken after from, oldest first.
func (h *history) since(key string, from time.Time) []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.series[key]
	if r == nil {
		return nil
	}
	var out []sample
	start, n := 0, r.next
	if r.full {
		start, n = r.next, len(r.buf)
	}
	for i := range n {
		s := r.buf[(start+i)%len(r.buf)]
		if s.at.After(from) {
			out = append(out, s)
		}
	}
	return out
}
