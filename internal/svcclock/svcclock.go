// Package svcclock keeps the time on a storage service's clock, as the Date
// header of its answers gives it, so that a client whose own clock is off
// still takes decisions about time that cross machines on the service's.
package svcclock

import (
	"sync/atomic"
	"time"
)

// Clock is the service's time as last seen. The zero value knows nothing
// and reads the local clock. It is safe for concurrent use.
type Clock struct {
	// offset is the service's clock less the local one, in nanoseconds;
	// known says whether an answer has set it.
	offset atomic.Int64
	known  atomic.Bool
}

// Saw records an answer's Date, taken now by the local clock. A Date is
// whole seconds, cut, not rounded: the service's time was between it and a
// second later. The lower end is kept, so that a wait computed from it is
// never shorter than the service will count (a message hidden by it shows
// up on time or up to a second late, never early). A nil date is ignored.
func (c *Clock) Saw(date *time.Time) { c.saw(date, time.Now()) }

func (c *Clock) saw(date *time.Time, local time.Time) {
	if date == nil || date.IsZero() {
		return
	}
	c.offset.Store(int64(date.Sub(local)))
	c.known.Store(true)
}

// Now is the time on the service's clock: the local clock moved by the
// offset the last Date showed; the local clock if none was seen.
func (c *Clock) Now() time.Time {
	now := time.Now()
	if !c.known.Load() {
		return now
	}
	return now.Add(time.Duration(c.offset.Load()))
}

// Known reports whether an answer has been seen.
func (c *Clock) Known() bool { return c.known.Load() }
