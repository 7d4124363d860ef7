package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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
	// classes is LimitOptions.Classes, and classCalls the calls of each
	// class (by prefix) running now.
	classes    []azdispatch.KeyClass
	classCalls map[string]int
	// inOrder is LimitOptions.InOrder. done holds, by their number in
	// the publisher's order (MetadataOrder), the keyed messages whose try
	// ended as the listener counts done: handled, given up (Permanent), or
	// failed on the last try (poisoned). early holds, by number, the
	// messages whose calls started before the message they follow was
	// done: none may, until the listener has given up a gap
	// (State.OrderGapsSkipped), which lets the messages after the gap go
	// on (a message cancelled, or poisoned before it took its key: the
	// handler sees neither).
	inOrder bool
	done    map[uint64]bool
	early   map[uint64]string
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
	if k.inOrder = r.IntN(3) == 0; k.inOrder {
		k.limit, k.done, k.early = 1, map[uint64]bool{}, map[uint64]string{}
	}
	e.opts.Limits = azdispatch.LimitOptions{
		Fleet:  k.fleet,
		PerKey: k.limit,
		Line:   []int{0, 1, 2}[r.IntN(3)],
		Wait:   time.Duration(20+r.IntN(500)) * time.Millisecond,
		Snooze: time.Duration(r.IntN(2)) * time.Second,
		// Leases in the payload store, whose faults then fail and lose
		// lease requests too.
		AcrossInstances: r.IntN(2) == 0,
		InOrder:         k.inOrder,
		// By the queue's clock: a message cancelled, or poisoned before it
		// took its key, leaves a gap its key waits out, each in turn; one
		// delayed or retried for longer is given up too.
		OrderWait: time.Duration(1+r.IntN(3)) * time.Second,
	}
	k.acrossInstances = e.opts.Limits.AcrossInstances || k.inOrder
	if r.IntN(3) == 0 {
		// Every key in a class of one or two calls at once, and key-1 in
		// one of its own, inside it, in half of those.
		k.classes = []azdispatch.KeyClass{{Prefix: "key-", Fleet: 1 + r.IntN(2)}}
		if r.IntN(2) == 0 {
			k.classes = append(k.classes, azdispatch.KeyClass{Prefix: "key-1", Fleet: 1})
		}
		k.classCalls = map[string]int{}
		e.opts.Limits.Classes = k.classes
	}
}

// classOf is the prefix of the class of key (the longest that matches),
// or "".
func (k *keyed) classOf(key string) (string, int) {
	var best azdispatch.KeyClass
	for _, c := range k.classes {
		if key != "" && strings.HasPrefix(key, c.Prefix) && len(c.Prefix) > len(best.Prefix) {
			best = c
		}
	}
	return best.Prefix, best.Fleet
}

// orderStarted notes a call of m that starts before the message it follows
// in its key's order is done, and a violation if the listener had given
// up no gap by then (s: its state at the call). The caller holds mu.
func (e *engineRound) orderStarted(m *azdispatch.Message[string], s azdispatch.State) {
	k := &e.keyed
	if !k.inOrder {
		return
	}
	if st, ok := parseStamp(m.Metadata[azdispatch.MetadataOrder]); ok && st.prev != 0 && !k.done[st.prev] {
		k.early[st.n] = fmt.Sprintf("%s (key %s, number %d) before %d", m.ID, m.Key, st.n, st.prev)
		if s.OrderGapsSkipped == 0 {
			e.violationf("message %s (key %s, number %d) started before %d, which it follows, was done, with no gap given up", m.ID, m.Key, st.n, st.prev)
		}
	}
}

// orderEnded notes a call of m that ends its try as done (err: the
// handler's result). The caller holds mu.
func (e *engineRound) orderEnded(m *azdispatch.Message[string], err error) {
	k := &e.keyed
	if !k.inOrder {
		return
	}
	var snooze *azdispatch.SnoozeError
	var permanent *azdispatch.PermanentError
	done := err == nil || errors.As(err, &permanent) ||
		m.DequeueCount >= e.opts.MaxDequeueCount && !errors.As(err, &snooze) && !errors.Is(err, context.Canceled)
	if st, ok := parseStamp(m.Metadata[azdispatch.MetadataOrder]); ok && done {
		k.done[st.n] = true
	}
}

// stamp is a message's place in its key's order, as MetadataOrder carries
// it: "publisher.number.follows".
type stamp struct{ n, prev uint64 }

func parseStamp(v string) (stamp, bool) {
	f := strings.Split(v, ".")
	if len(f) != 3 {
		return stamp{}, false
	}
	n, err1 := strconv.ParseUint(f[1], 10, 64)
	prev, err2 := strconv.ParseUint(f[2], 10, 64)
	return stamp{n, prev}, err1 == nil && err2 == nil
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
	if c, fleet := k.classOf(m.Key); c != "" {
		if k.classCalls[c]++; k.classCalls[c] > fleet {
			e.violationf("%d calls of the class %q at once, past its limit of %d", k.classCalls[c], c, fleet)
		}
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
	if c, _ := k.classOf(m.Key); c != "" {
		k.classCalls[c]--
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
	for _, c := range k.classes {
		fleet += fmt.Sprintf(", class %q of %d", c.Prefix, c.Fleet)
	}
	return fmt.Sprintf("%d keys, limit %d, across instances %t, in order %t", k.keys, k.limit, k.acrossInstances, k.inOrder) + fleet
}

func (k *keyed) summary() string {
	if !k.on {
		return ""
	}
	return fmt.Sprintf("; keys: at most %d of one in a handler at once, %d snoozes returned, %d messages before the one they follow", k.mostKeys, k.snoozed, len(k.early))
}

// leases reports whether the round's limits take leases on the payload
// store: a key limit across instances, classes, or a fleet limit.
func (k *keyed) leases() bool {
	return k.on && (k.acrossInstances || len(k.classes) > 0) || k.fleet > 0
}

// checkFleet notes a violation if more handler calls run than the fleet
// limit lets. The caller holds mu.
func (e *engineRound) checkFleet() {
	if f := e.keyed.fleet; f > 0 && e.running > f {
		e.violationf("%d handler calls at once, past the fleet limit of %d", e.running, f)
	}
}
