// Package svcclock keeps the time on a storage service's clock, as the Date
// header of its answers gives it, so that a client whose own clock is off
// still takes decisions about time that cross machines on the service's.
package svcclock

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Clock is the service's time as last seen. The zero value knows nothing
// and reads the local clock, and so does a nil *Clock (which ignores what
// it is shown). It is safe for concurrent use.
type Clock struct {
	// offset is the service's clock less the local one, in nanoseconds;
	// known says whether an answer has set it.
	offset atomic.Int64
	known  atomic.Bool
}

// resetBelow is how far below the kept offset a new one must be to be
// taken as a clock set back, rather than as a Date cut to its second.
const resetBelow = 2 * time.Second

// Saw records an answer's Date, taken now by the local clock. A Date is
// whole seconds, cut, not rounded: the service's time was between it and a
// second later. The lower end is kept, so that a wait computed from it is
// never shorter than the service will count (a message hidden by it shows
// up on time or up to a second late, never early). Of the Dates seen, the
// one that says the most is kept (see resetBelow): so the clock comes within
// a few milliseconds of the service's once an answer came just after its
// second turned, rather than falling back by up to a second at each
// answer. A nil date is ignored.
func (c *Clock) Saw(date *time.Time) { c.saw(date, time.Now()) }

func (c *Clock) saw(date *time.Time, local time.Time) {
	if c == nil || date == nil || date.IsZero() {
		return
	}
	offset := int64(date.Sub(local))
	// Every Date is a lower bound, off by up to a second: the highest
	// offset seen is the closest. One lower by more than resetBelow is a
	// clock that was set back (or this machine's set forward): taken.
	for {
		old := c.offset.Load()
		if c.known.Load() && offset <= old && old-offset <= int64(resetBelow) {
			return
		}
		if c.offset.CompareAndSwap(old, offset) {
			break
		}
	}
	c.known.Store(true)
}

// Now is the time on the service's clock: the local clock moved by the
// offset the last Date showed; the local clock if none was seen.
func (c *Clock) Now() time.Time {
	now := time.Now()
	if !c.Known() {
		return now
	}
	return now.Add(time.Duration(c.offset.Load()))
}

// Known reports whether an answer has been seen.
func (c *Clock) Known() bool { return c != nil && c.known.Load() }

// SawHeader records the Date header of an answer, as Saw does: every
// answer of the service carries one, errors included, so that a request
// that failed still tells the time. A header that does not parse is
// ignored.
func (c *Clock) SawHeader(h http.Header) {
	if c == nil {
		return
	}
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		c.Saw(&d)
	}
}
