package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch/internal/dueline"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
)

// onceLife is how long the mark of a delivered occurrence is kept: a
// duplicate of it sent later than that (by a scheduler paused for a week)
// would be delivered.
const onceLife = MaxVisibility

// deliverOnce decides, for a message a [Scheduler] sent for occurrence
// occ, whether it is the occurrence's message or a duplicate: the first
// delivery of any message of that occurrence and item writes the mark
// (If-None-Match: *) with its message ID, and a delivery that finds the
// mark of another message is a duplicate, deleted unhandled. A message
// delivered again (its handler failed, or its delete) finds its own mark.
// Without a record store there is no mark to find, and every message is
// delivered. rest is the message's text after its due line.
func (l *Listener[T]) deliverOnce(t *try, occ *dueline.Occurrence, rest string) (action, bool) {
	if l.records == nil {
		return action{}, false
	}
	d := t.d
	mark := &records.Record{Kind: payload.KindOnce, Value: []byte(d.ID), Life: onceLife}
	err := l.records.Write(t.ctx, occ.Once, mark)
	if errors.Is(err, records.ErrChanged) {
		var r *records.Record
		if r, err = l.records.Read(t.ctx, occ.Once); err == nil && string(r.Value) != d.ID {
			t.blob = l.ownPayload(rest)
			return action{kind: actDuplicate}, true
		}
	}
	if err != nil {
		// Not known whether another message of the occurrence was
		// delivered: not delivered either, until a later try can tell.
		l.storageFailed(err)
		if t.ctx.Err() != nil {
			return l.interrupted(t), true
		}
		return action{kind: actRetry, err: fmt.Errorf("cannot tell whether occurrence %s of schedule %q was delivered: %w",
			time.Unix(occ.At, 0).UTC().Format(time.RFC3339), occ.Schedule, err)}, true
	}
	return action{}, false
}

// dropDuplicate deletes a duplicate of an occurrence's message, then its
// payload blob, if any.
func (l *Listener[T]) dropDuplicate(ctx context.Context, t *try) {
	if l.deleteUnhandled(ctx, t, &l.stats.duplicates, "a duplicate of a scheduled occurrence could not be deleted; it reappears, and is found a duplicate again") {
		l.msgLog(t.d).Info("deleted a duplicate of a scheduled occurrence, unhandled")
	}
}

// occurrenceOf is what a handler sees of the occurrence a due line names.
func occurrenceOf(o *dueline.Occurrence) *Occurrence {
	return &Occurrence{Schedule: o.Schedule, At: time.Unix(o.At, 0).UTC(), Late: o.Late, Missed: o.Missed, Item: o.Item}
}
