package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch"
)

// A paused listener must leave nothing hidden: every message not yet
// deleted is visible, there for whoever receives once the pause ends.
// The service shows it two ways, and the listeners a third.
//
//   - The approximate count, which on the emulator is exact and counts
//     hidden messages too, is every message not deleted: it must lie
//     between the messages written and the messages begun, less those
//     handled. A message handled whose delete failed stays hidden and
//     counted, and shows here.
//   - The oldest message not yet handled is visible (a peek, which hides
//     nothing, sees it). The trickle writes in its numbers' order, and the
//     emulator receives and peeks oldest first; no message is released in
//     this run (every handler succeeds, and renewals keep a message hidden
//     while it is in hand), so a message a listener hid was older than
//     every message left visible at its receive, and than every message
//     sent since: if any were hidden, the oldest not handled would be.
//   - The workers' listeners say they hold no message (State.InFlight).

// queuePauseProbe is one look, in the settled pause, for hidden messages.
type queuePauseProbe struct {
	at            time.Time
	count         int  // the queue's approximate count
	least, most   int  // the messages not deleted, as the trickle and the handlers count them
	oldest        int  // the oldest message not handled; 0 if every message written was
	oldestVisible bool // the peek saw it
	inHand        int  // the workers' messages in hand, as each last said
}

// hidden is how many messages the probe shows hidden, at least: those the
// workers hold, those counted beyond what is left to handle, and the
// oldest if it cannot be seen.
func (p queuePauseProbe) hidden() int {
	h := max(p.inHand, p.count-p.most, 0)
	if p.oldest != 0 && !p.oldestVisible {
		h = max(h, 1)
	}
	return h
}

// ok reports whether the probe found the queue as a settled pause leaves
// it: nothing hidden, nothing gone unhandled.
func (p queuePauseProbe) ok() bool {
	return p.hidden() == 0 && p.count >= p.least
}

// probeHidden looks at q (see above), with the trickle's counts and the
// workers' reports. The judge checks apart that no handler call started
// in the settled pause, so that what the workers handled is the same
// before and after the requests.
func probeHidden(ctx context.Context, q *azdispatch.Queue, tr *trickle, tl *queuePauseTimeline) (queuePauseProbe, error) {
	p := queuePauseProbe{at: time.Now()}
	written := int(tr.done.Load())
	count, err := q.Depth(ctx)
	if err != nil {
		return p, err
	}
	peeked, err := q.Peek(ctx, azdispatch.MaxBatch)
	if err != nil {
		return p, err
	}
	begun := int(tr.started.Load())
	handled := tl.handledSet()
	p.count, p.inHand = count, tl.inHand()
	p.least, p.most = written-len(handled), begun-len(handled)
	for n := 1; n <= written; n++ {
		if !handled[n] {
			p.oldest = n
			break
		}
	}
	for _, d := range peeked {
		n, err := strconv.Atoi(strings.TrimSpace(azdispatch.DescribeText(d.Text).Body))
		if err == nil && n == p.oldest {
			p.oldestVisible = true
		}
	}
	return p, nil
}
