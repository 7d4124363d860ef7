// Package route says how a message goes on a queue: visible at once or
// after a delay, for a time by the service's clock, with a key or not, with
// its publisher's TTL or its own; and from that, the line in its text that
// says when it is due, whether listeners hide it again until then (hops),
// and when it expires. Every answer is a pure function of the route and
// the publisher's [Policy], so it is tested without a queue or a clock.
package route

import (
	"math"
	"time"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// DefaultTTL is the service's message lifetime when none is given.
const DefaultTTL = 7 * 24 * time.Hour

// Route is how one message goes.
type Route struct {
	Delay  time.Duration    // whole seconds
	At     time.Time        // SendAt's time, to the second
	Key    string           // "": no key
	Group  string           // the reference of the group it is a child of; "": none
	Track  string           // its status token (see internal/track); "": not tracked
	TTL    time.Duration    // the send's own, if OwnTTL
	OwnTTL bool             // TTL is the send's, not the publisher's
	Line   bool             // a due line even within the hop: SendAt's time, before the target's clock is known
	Occ    *wire.Occurrence // a scheduler's occurrence the message is sent for: a due line always
}

// Policy is what a publisher's options say of every route.
type Policy struct {
	// Hop is the longest the service hides a message: a week, or less in
	// tests, which cannot wait one.
	Hop time.Duration
	// TTL is the publisher's message lifetime: 0 for the service's,
	// negative for never.
	TTL time.Duration
	// Plain sends a message delayed within the hop with no due line.
	Plain bool
}

// For is the route of a send with delay (checked: 0 to wire.MaxAfter), or
// for at (zero: none), with key and its own ttl (0: the publisher's):
// hidden for what remains of the wait by serviceNow, the service's clock
// as the publisher knows it. timeKnown says whether the target told that
// clock; if not, the message carries its time in a due line, so that
// listeners decide on the service's clock.
func For(delay time.Duration, at time.Time, key string, ttl time.Duration, serviceNow time.Time, timeKnown bool) Route {
	r := Route{Delay: UpToSecond(delay), Key: key, TTL: ttl, OwnTTL: ttl != 0}
	if at.IsZero() {
		return r
	}
	at = at.UTC()
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	r.At = at
	if wait := at.Sub(serviceNow); wait > 0 {
		// The due line carries the time itself: the delay only sets the
		// first hop and the TTL, and a century says as much of those as
		// any longer wait (which a Duration may not even hold).
		r.Delay = UpToSecond(min(wait, wire.MaxAfter))
		r.Line = !timeKnown
	}
	return r
}

// UpToSecond rounds d up to whole seconds, the service's unit, so that a
// message is never due earlier than asked.
func UpToSecond(d time.Duration) time.Duration {
	if t := d.Truncate(time.Second); t != d {
		return t + time.Second
	}
	return d
}

// DueLine is the line that records when a message sent as r is due: for
// one the service cannot keep hidden until then alone (see Hops), and for
// one it can, so that a listener counts its time in queue from its due
// time rather than its insertion (see [wire.DueLine.Kept]). A message sent
// for now has none (nil), and so has one delayed within the hop under a
// Plain policy.
func (p Policy) DueLine(r Route) *wire.DueLine {
	switch {
	case r.Occ != nil:
		return &wire.DueLine{At: r.At, Occ: r.Occ}
	case !p.Hops(r) && (r.Delay <= 0 || p.Plain):
		return nil
	case !p.Hops(r):
		return &wire.DueLine{After: int64(r.Delay / time.Second)}
	case !r.At.IsZero():
		return &wire.DueLine{At: r.At}
	}
	return &wire.DueLine{After: int64(r.Delay / time.Second)}
}

// Hops reports whether a message sent as r may be hidden again by
// listeners until it is due: one due beyond the service's longest hiding,
// one sent for a time before the target's clock is known, and a
// scheduler's (which a listener may hold).
func (p Policy) Hops(r Route) bool {
	return r.Occ != nil || r.Delay > p.Hop || r.Line
}

// TTLOf is how long a message sent as r says it lives: 0 for the
// service's default, negative for never. A delayed one lives its TTL past
// its due time (the service would refuse a delay longer than the TTL, and
// a message that expired unseen would be lost).
func (p Policy) TTLOf(r Route) time.Duration {
	ttl := p.TTL
	if r.OwnTTL {
		ttl = r.TTL
	}
	if ttl < 0 || !p.Hops(r) && r.Delay <= 0 {
		return ttl
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl > math.MaxInt32*time.Second-r.Delay {
		return -1 // beyond what the service counts (68 years): never expires
	}
	return r.Delay + ttl
}

// Expires is when a message sent as r, inserted at inserted, expires, in
// Unix seconds; 0 if never. The service counts the TTL it was sent with
// from the insertion, whatever the message's due time: a send for a time
// already past is due before it was inserted.
func (p Policy) Expires(r Route, inserted time.Time) int64 {
	ttl := p.TTLOf(r)
	switch {
	case ttl < 0:
		return 0
	case ttl == 0:
		ttl = DefaultTTL
	}
	return inserted.Add(ttl).Unix()
}

// BlobExpires is when a payload blob written at now for a message sent as
// r may go: when the message does, or never (the zero time).
func (p Policy) BlobExpires(r Route, now time.Time) time.Time {
	switch ttl := p.TTLOf(r); {
	case ttl == 0:
		return now.Add(DefaultTTL)
	case ttl > 0:
		return now.Add(ttl)
	}
	return time.Time{}
}
