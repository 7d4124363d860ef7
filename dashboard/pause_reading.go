package dashboard

import (
	"context"
	"fmt"
	"sync"

	"github.com/azdispatch/azdispatch"
)

// A queue's pause (see [azdispatch.Pauser]) is read with its depth, by
// the overview's reading: a queue keeps it in its metadata, which the Get
// Queue Properties that answers the depth carries too, so that showing it
// costs no request. Only a queue of another kind (a shard seen through its
// sharded set, a memqueue) needs a request of its own for it, made beside
// the depth's.

// pauseVal is a queue's pause as one reading found it.
type pauseVal struct {
	// Pausable says the queue can be paused; when false nothing is shown.
	Pausable bool
	// State is the pause that held when it was read; zero for none.
	State azdispatch.PauseState
	// Err is why it is not known; "" when read.
	Err string
}

// paused says the reading found a pause holding.
func (p pauseVal) paused() bool { return p.State != (azdispatch.PauseState{}) }

// readDepthAndPause reads u's depth, and its pause if it can be paused:
// one request for a [*azdispatch.Queue] (see [azdispatch.DepthAndPause]),
// or the depth and the pause at once, each with its own error, so that a
// depth read is shown even when its pause's read failed.
func readDepthAndPause(ctx context.Context, u *unit) (val, pauseVal) {
	p, ok := u.read.(azdispatch.Pauser)
	if !ok || u.caps.Pauser == nil {
		return readVal(ctx, u.read.Depth), pauseVal{}
	}
	pv := pauseVal{Pausable: true}
	if _, one := u.read.(*azdispatch.Queue); one {
		depth := readVal(ctx, func(ctx context.Context) (int, error) {
			n, st, err := azdispatch.DepthAndPause(ctx, u.read)
			pv.State = st
			return n, err
		})
		pv.Err = depth.Err
		return depth, pv
	}
	var depth val
	var wg sync.WaitGroup
	wg.Go(func() { depth = readVal(ctx, u.read.Depth) })
	st, err := p.PauseState(ctx)
	wg.Wait()
	if err != nil {
		pv.Err = readError(ctx, err)
	}
	pv.State = st
	return depth, pv
}

// pauseCell is the Pause column of one overview row.
type pauseCell struct {
	Shown  bool   // the row's queue, or one of its queues, can be paused
	Paused bool   // a pause holds, by the reading: the row is marked
	Words  string // "paused by ops until 2026-01-02 15:04:05Z", "not paused", "—"
	Title  string // since when, or why it was not read
	// Target is the name a pause or resume of this row takes (see
	// pauseTarget); "" for a row that has none (a shard, an account).
	Target string
	Act    bool // the viewer may pause and resume it
}

// pauseWords describes the pauses the reading found for units, the queues
// behind one row. For a sharded set, whose listeners take the whole set as
// paused while any shard is, the pause that ends last; for a queue set,
// whose listeners go on with the queues that are not paused, how many are.
func pauseWords(r overviewReading, units []*unit, queueSet bool) pauseCell {
	var c pauseCell
	var last azdispatch.PauseState
	pausable, paused := 0, 0
	var unread []string
	for _, u := range units {
		pv := r.Units[u.name].Pause
		if !pv.Pausable {
			continue
		}
		pausable++
		switch {
		case pv.paused():
			paused++
			if pv.State.Until.After(last.Until) {
				last = pv.State
			}
		case pv.Err != "":
			unread = append(unread, fmt.Sprintf("%s: %s", u.name, pv.Err))
		}
	}
	if pausable == 0 {
		return c
	}
	c.Shown, c.Paused = true, paused > 0
	if len(unread) > 0 {
		c.Title = "not read: " + joinShort(unread)
	}
	switch {
	case queueSet && paused > 0:
		c.Words = fmt.Sprintf("%d of %d queues paused; the others go on", paused, pausable)
	case paused > 0:
		c.Words = describePause(last)
		if pausable > 1 && paused < pausable {
			c.Words += fmt.Sprintf(" (%d of %d shards; the set's listeners hold while any is)", paused, pausable)
		}
		c.Title = joinTitle("since "+stamp(last.Since), c.Title)
	case len(unread) > 0:
		c.Words = "—"
	default:
		c.Words = "not paused"
	}
	return c
}

// describePause is a pause in words, its end on the service's clock as
// every time on the pages is.
func describePause(p azdispatch.PauseState) string {
	if p.By == "" {
		return "paused until " + stamp(p.Until)
	}
	return fmt.Sprintf("paused by %s until %s", p.By, stamp(p.Until))
}

// joinShort joins reasons for a title, the first few of them.
func joinShort(parts []string) string {
	const most = 3
	if len(parts) > most {
		return fmt.Sprintf("%s; and %d more", joinTitle(parts[:most]...), len(parts)-most)
	}
	return joinTitle(parts...)
}

// joinTitle joins the parts that are not empty with "; ".
func joinTitle(parts ...string) string {
	out := ""
	for _, p := range parts {
		switch {
		case p == "":
		case out == "":
			out = p
		default:
			out += "; " + p
		}
	}
	return out
}
