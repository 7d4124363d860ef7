package azdispatch_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/azdispatch/azdispatch"
)

// keyed is the engine test's round with keys: a listener with a key limit,
// a publisher that sends most of its messages with one of a few keys, and
// handlers that sometimes say "not yet" (Snooze). At every handler call it
// checks that no more messages of a key are in a handler than the limit
// (the items of one batch are one message); at the end, that State counts
// the snoozes among the ways a message is settled.
type keyed struct {
	on    bool
	limit int
	keys  int
	// inside is, by key, the messages in a handler now, and how many of
	// their calls (a batch's items) are running.
	inside map[string]map[string]int
	// snoozes counts by number the snoozes its handler returned: a
	// message snoozes twice at most, since a snooze counts no try and the
	// same behaviour would be drawn again.
	snoozes  map[int]int
	snoozed  int
	mostKeys int // the most messages of one key in a handler at once
	// acrossInstances is LimitOptions.AcrossInstances, and fleet
	// LimitOptions.Fleet.
	acrossInstances bool
	fleet           int
}

// chooseKeys draws whether the round uses keys, and its key options.
func (e *engineRound) chooseKeys(r *rand.Rand) {
	k := &e.keyed
	if r.IntN(4) == 0 {
		// A fleet of this one listener: handler calls past it wait.
		k.fleet = 1 + r.IntN(3)
		e.opts.Limits.Fleet = k.fleet
	}
	if k.on = r.IntN(2) == 0; !k.on {
		return
	}
	k.limit, k.keys = 1+r.IntN(2), 1+r.IntN(6)
	k.inside, k.snoozes = map[string]map[string]int{}, map[int]int{}
	e.opts.Limits = azdispatch.LimitOptions{
		Fleet:  k.fleet,
		PerKey: k.limit,
		Line:   []int{0, 1, 2}[r.IntN(3)],
		Wait:   time.Duration(20+r.IntN(500)) * time.Millisecond,
		Snooze: time.Duration(r.IntN(2)) * time.Second,
		// Leases in the payload store, whose faults then fail and lose
		// lease requests too.
		AcrossInstances: r.IntN(2) == 0,
	}
	k.acrossInstances = e.opts.Limits.AcrossInstances
}

// keyOf is a key for a publisher's send: one of the round's few, or none.
func (e *engineRound) keyOf() string {
	if !e.keyed.on || e.r.IntN(5) == 0 {
		return ""
	}
	return fmt.Sprint("key-", e.r.IntN(e.keyed.keys))
}

// keyEntered notes a handler call of m under its key, and a violation if
// more messages of the key than the limit are in a handler. The caller
// holds mu.
func (e *engineRound) keyEntered(m *azdispatch.Message[string]) {
	k := &e.keyed
	if !k.on || m.Key == "" {
		return
	}
	in := k.inside[m.Key]
	if in == nil {
		in = map[string]int{}
		k.inside[m.Key] = in
	}
	in[m.ID]++
	k.mostKeys = max(k.mostKeys, len(in))
	if len(in) > k.limit {
		e.violationf("%d messages of key %s in a handler at once, past its limit of %d", len(in), m.Key, k.limit)
	}
}

// keyLeft notes the end of a call keyEntered noted. The caller holds mu.
func (e *engineRound) keyLeft(m *azdispatch.Message[string]) {
	k := &e.keyed
	if !k.on || m.Key == "" {
		return
	}
	in := k.inside[m.Key]
	if in[m.ID]--; in[m.ID] == 0 {
		delete(in, m.ID)
	}
}

// snoozeSome returns Snooze for a tenth of the calls of a keyed round, for
// a second or none, twice at most per number. The caller holds mu.
func (e *engineRound) snoozeSome(n int, dequeueCount int64) error {
	k := &e.keyed
	if !k.on || behaviourOf(e.seed^0x5a5a, n, dequeueCount)%10 != 0 || k.snoozes[n] >= 2 {
		return nil
	}
	k.snoozes[n]++
	k.snoozed++
	return azdispatch.Snooze(time.Duration(behaviourOf(e.seed, n, 0)%2) * time.Second)
}

func (k *keyed) describe() string {
	fleet := ""
	if k.fleet > 0 {
		fleet = fmt.Sprintf(", fleet limit %d", k.fleet)
	}
	if !k.on {
		return "no keys" + fleet
	}
	return fmt.Sprintf("%d keys, limit %d, across instances %t", k.keys, k.limit, k.acrossInstances) + fleet
}

func (k *keyed) summary() string {
	if !k.on {
		return ""
	}
	return fmt.Sprintf("; keys: at most %d of one in a handler at once, %d snoozes returned", k.mostKeys, k.snoozed)
}

// leases reports whether the round's limits take leases on the payload
// store: a key limit across instances, or a fleet limit.
func (k *keyed) leases() bool { return k.on && k.acrossInstances || k.fleet > 0 }

// checkFleet notes a violation if more handler calls run than the fleet
// limit lets. The caller holds mu.
func (e *engineRound) checkFleet() {
	if f := e.keyed.fleet; f > 0 && e.running > f {
		e.violationf("%d handler calls at once, past the fleet limit of %d", e.running, f)
	}
}
