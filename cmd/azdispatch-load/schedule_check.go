package main

import (
	"fmt"
	"time"
)

// The schedule checker judges the occurrences of a window of time, from
// what the one listener's handler saw:
//
//   - expected: every occurrence of each schedule in the window (every
//     multiple of its interval, as the library's Every fires);
//   - missing: expected, and never handled, nor stood for by a catch-up;
//   - skipped: expected and not handled, but counted in the Missed of a
//     catch-up that was (MisfireOne sends one late message for any number
//     of missed occurrences): what the policy promises, reported apart.
//     With a scheduler running at all times there should be none;
//   - duplicated: handled more than once (the listener is to drop every
//     message of an occurrence but the first, unhandled);
//   - late: first handled more than the bound after its time;
//   - unexpected: handled, in the window, and not an occurrence of its
//     schedule at all.

// handling is one call of the listener's handler for a scheduled message.
type handling struct {
	Schedule     string    `json:"schedule"`
	At           time.Time `json:"at"`
	Item         int       `json:"item"`
	Late         bool      `json:"late,omitempty"`
	Missed       int64     `json:"missed,omitempty"`
	Received     time.Time `json:"received"` // when the handler started, by this machine's clock
	ID           string    `json:"id"`
	DequeueCount int64     `json:"dequeue_count"`
	By           string    `json:"by"` // the instance that sent it
}

// scheduleVerdict is what the checker found.
type scheduleVerdict struct {
	Expected, Handled    int
	Missing, Skipped     int
	Duplicated           int // occurrences handled more than once
	DuplicateHandlings   int // handlings after each occurrence's first
	Late, LateFlagged    int // beyond the bound; handled with Occurrence.Late
	Delayed              int // handled later than the delayed mark: a fault held them up
	Unexpected           int
	MaxLate              time.Duration
	MissingAt, LateAt    []string // the first few, for the report
	DuplicatedAt         []string
	UnexpectedAt         []string
	HandledOutsideWindow int
}

// ok reports whether the window passed.
func (v scheduleVerdict) ok() bool {
	return v.Missing == 0 && v.Duplicated == 0 && v.Late == 0 && v.Unexpected == 0
}

// occKey names one message of an occurrence.
type occKey struct {
	schedule string
	at       int64 // Unix seconds
	item     int
}

func (k occKey) String() string {
	return fmt.Sprintf("%s@%s", k.schedule, time.Unix(k.at, 0).UTC().Format(time.TimeOnly))
}

// judgeSchedules judges the occurrences of specs whose times fall in
// [from, to], from the handlings; delayed is the lateness past which an
// occurrence counts as held up by a fault.
func judgeSchedules(hs []handling, specs []scheduleSpec, from, to time.Time, bound, delayed time.Duration) scheduleVerdict {
	var v scheduleVerdict
	every := map[string]time.Duration{}
	for _, s := range specs {
		every[s.Name] = s.Every
	}
	first := map[occKey]handling{}
	count := map[occKey]int{}
	covered := map[occKey]bool{}
	for _, h := range hs {
		k := occKey{h.Schedule, h.At.Unix(), h.Item}
		if prev, ok := first[k]; !ok || h.Received.Before(prev.Received) {
			first[k] = h
		}
		count[k]++
		// A catch-up stands for the Missed occurrences just before its own.
		for i := int64(1); i <= h.Missed && every[h.Schedule] > 0; i++ {
			covered[occKey{h.Schedule, h.At.Add(-time.Duration(i) * every[h.Schedule]).Unix(), h.Item}] = true
		}
	}
	note := func(list *[]string, k occKey, extra string) {
		if len(*list) < 10 {
			*list = append(*list, k.String()+extra)
		}
	}
	inWindow := func(at time.Time) bool { return !at.Before(from) && !at.After(to) }
	for k, h := range first {
		if !inWindow(h.At) {
			v.HandledOutsideWindow++
			continue
		}
		if d := every[k.schedule]; d <= 0 || h.At.Truncate(d) != h.At || k.item != 0 {
			v.Unexpected++
			note(&v.UnexpectedAt, k, "")
		}
	}
	for _, s := range specs {
		at := from.Truncate(s.Every)
		if at.Before(from) {
			at = at.Add(s.Every)
		}
		for ; !at.After(to); at = at.Add(s.Every) {
			v.Expected++
			k := occKey{s.Name, at.Unix(), 0}
			h, ok := first[k]
			switch {
			case !ok && covered[k]:
				v.Skipped++
			case !ok:
				v.Missing++
				note(&v.MissingAt, k, "")
			default:
				v.Handled++
				late := h.Received.Sub(at)
				v.MaxLate = max(v.MaxLate, late)
				if late > bound {
					v.Late++
					note(&v.LateAt, k, fmt.Sprintf(" (%.1f s)", late.Seconds()))
				}
				if late > delayed {
					v.Delayed++
				}
				if h.Late {
					v.LateFlagged++
				}
				if n := count[k]; n > 1 {
					v.Duplicated++
					v.DuplicateHandlings += n - 1
					note(&v.DuplicatedAt, k, fmt.Sprintf(" (%d times)", n))
				}
			}
		}
	}
	return v
}
