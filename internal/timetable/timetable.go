// Package timetable decides, for a schedule, which occurrences to send
// when a scheduler wakes: those due, those missed while no scheduler ran
// (by a misfire policy), and the next one to wait for. It also holds the
// state a schedule keeps in its record. It does no I/O.
package timetable

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"
)

// Misfire is what becomes of occurrences missed by more than the grace.
type Misfire int

const (
	// One sends one catch-up for any number missed: the latest.
	One Misfire = iota
	// Skip sends none of them.
	Skip
	// Each sends each of them, up to a cap (the latest ones).
	Each
)

// Occurrence is one to send.
type Occurrence struct {
	At     time.Time
	Late   bool  // sent more than the grace after its time
	Missed int64 // missed occurrences before it that it stands for (One)
	RunNow bool  // asked for by a run-now, besides the timetable
}

// Plan is what to do at a wake.
type Plan struct {
	Send    []Occurrence
	Skipped int64     // missed occurrences sent by nothing
	Next    time.Time // the first occurrence after now; zero: none
}

// maxScan bounds the occurrences a plan walks before it jumps: a schedule
// every second that no scheduler ran for a month has 2.6 million, and a
// cron expression's next occurrence costs tens of microseconds. Beyond
// this many, the missed ones up to a window before the grace are counted
// from their spacing (Skipped is then an estimate), and the walk goes on
// from the window, which holds the latest missed ones.
const maxScan = 10_000

// maxSend bounds the occurrences on time that one plan sends: the next
// wake, at once, sends the rest, so that a wake's sends stay within a
// claim.
const maxSend = 100

// Decide plans a wake at now for a schedule whose first unsent occurrence
// is next: occurrences up to now are due; those older than grace are
// missed, and policy (with limit, for Each) says which of them to send.
func Decide(next, now time.Time, nextOf func(time.Time) time.Time, policy Misfire, limit int, grace time.Duration) Plan {
	var p Plan
	keep := max(limit, 1)
	var missed []time.Time // the latest keep missed
	var missedCount int64
	t, from := next, next // from: where the walk since the last jump began
	for n := 0; !t.IsZero() && !t.After(now); n++ {
		if now.Sub(t) <= grace {
			if len(p.Send) == maxSend {
				break // the rest at the next wake
			}
			p.Send = append(p.Send, Occurrence{At: t})
			t = nextOf(t)
			continue
		}
		if n >= maxScan {
			spacing := t.Sub(from) / time.Duration(n)
			if w := window(t, now.Add(-grace), spacing, keep, nextOf); w.After(t) {
				missedCount += int64(w.Sub(t)/spacing) + 1 // t itself, and those up to w
				missed = missed[:0]                        // the window holds later ones
				t, from, n = nextOf(w), w, 0
				continue
			}
			n = 0 // fewer than keep lie between t and the grace: walk them
		}
		missedCount++
		missed = append(missed, t)
		if len(missed) > keep {
			missed = missed[1:]
		}
		t = nextOf(t)
	}
	p.Next = t
	var late []Occurrence
	switch policy {
	case One:
		if len(missed) > 0 {
			late = []Occurrence{{At: missed[len(missed)-1], Late: true, Missed: missedCount - 1}}
		}
	case Each:
		for _, m := range missed[max(len(missed)-limit, 0):] {
			late = append(late, Occurrence{At: m, Late: true})
		}
	}
	p.Skipped = missedCount - int64(len(late))
	if policy == Each && len(late) > 0 {
		late[0].Missed = p.Skipped // the oldest sent stands for those before it
	}
	p.Send = append(late, p.Send...)
	return p
}

// window returns a time after which at least keep occurrences lie before
// cutoff, found by doubling a span of spacing back from cutoff, or after
// (no jump) if the span reaches back to it first: for spacing that is
// irregular (working hours, weekdays), the latest missed may lie well
// before the last few spacings.
func window(after, cutoff time.Time, spacing time.Duration, keep int, nextOf func(time.Time) time.Time) time.Time {
	if spacing <= 0 {
		return after
	}
	for k := time.Duration(keep + 2); ; k *= 2 {
		w := cutoff.Add(-spacing * k)
		if !w.After(after) {
			return after
		}
		found := 0
		for t := nextOf(w); !t.IsZero() && t.Before(cutoff) && found < keep; t = nextOf(t) {
			found++
		}
		if found >= keep {
			return w
		}
	}
}

// Every is the occurrences of a fixed interval: the multiples of it since
// the zero time, so that every process finds the same ones (an hourly one
// fires on the hour, one every 2 s at even seconds).
func Every(interval time.Duration) func(time.Time) time.Time {
	return func(after time.Time) time.Time { return after.Truncate(interval).Add(interval) }
}

// Jitter is how long after occurrence at the schedule named name fires:
// a spread in [0, spread) that every process computes alike, so that they
// wake together and one claim settles it.
func Jitter(name string, at time.Time, spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", name, at.UnixNano())
	return time.Duration(h.Sum64() % uint64(spread))
}

// State is what a schedule's record holds: the value every scheduler of
// it reads and writes under its ETag.
type State struct {
	Name  string `json:"name"`
	Queue string `json:"queue,omitempty"` // the publisher's target
	// Spec is what the schedule was when the state was written ("every
	// 2s", "cron 0 3 * * * Europe/Berlin", "func"): a scheduler whose
	// schedule differs plans anew from now.
	Spec string `json:"spec"`
	// Next is the first occurrence not yet sent.
	Next time.Time `json:"next,omitzero"`
	// Last is the last occurrence sent, LastBy the instance that sent it,
	// LastSent when, by the store's clock, and LastLate whether it was late.
	Last     time.Time `json:"last,omitzero"`
	LastBy   string    `json:"last_by,omitempty"`
	LastSent time.Time `json:"last_sent,omitzero"`
	LastLate bool      `json:"last_late,omitempty"`
	// Sent and Skipped count occurrences sent, and missed and not sent.
	Sent    int64 `json:"sent,omitempty"`
	Skipped int64 `json:"skipped,omitempty"`
	// ClaimBy is the instance sending the occurrences from Next; the claim
	// holds from the record's write for the claim timeout.
	ClaimBy string `json:"claim_by,omitempty"`
	// Done says the schedule has no more occurrences.
	Done bool `json:"done,omitempty"`
	// Pause holds the schedule's sends until its Until, by the store's
	// clock: the occurrences before its end are missed, for the misfire
	// policy, when the first scheduler to wake after it sends. Zero: not
	// paused, or that scheduler has decided them.
	Pause Pause `json:"pause,omitzero"`
	// RunNow asks for one occurrence besides the timetable's, at this time
	// (the store's clock when it was asked): the next scheduler to wake
	// sends it. LastRunNow is the time of the last one sent.
	RunNow     time.Time `json:"run_now,omitzero"`
	LastRunNow time.Time `json:"last_run_now,omitzero"`
}

// Pause is a schedule's pause: from when until when, on the store's clock,
// and who paused it.
type Pause struct {
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	By    string    `json:"by,omitempty"`
}

// Holds reports whether the pause holds at now, on the store's clock.
func (p Pause) Holds(now time.Time) bool { return !p.Until.IsZero() && now.Before(p.Until) }

// Grace is the grace a plan at now uses once the pause has ended: no more
// than the time since its end, so that every occurrence that fell in it is
// missed, however short the pause, and the misfire policy decides it.
func (p Pause) Grace(now time.Time, grace time.Duration) time.Duration {
	if p.Until.IsZero() {
		return grace
	}
	return max(min(grace, now.Sub(p.Until)), 0)
}

// Encode returns s as a record's value.
func (s *State) Encode() []byte {
	b, _ := json.Marshal(s)
	return b
}

// DecodeState reads a record's value.
func DecodeState(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("schedule state: %w", err)
	}
	return &s, nil
}
