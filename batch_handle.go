package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// resolve handles a message whose text is a pointer. A batch is run here to
// its end. A single payload's text is read and returned, for process to
// decode and handle like any message. ok is false when resolve settled the
// message itself: a batch, an invalid pointer, or a payload that could not
// be read.
func (l *Listener[T]) resolve(run, work context.Context, d *Delivery) (p *pointer, text string, ok bool) {
	p, err := parsePointer(d.Text, l.cfg.PayloadLimits)
	if err != nil {
		l.poison(work, d, err.Error())
		return nil, "", false
	}
	if l.cfg.Payloads == nil {
		l.poison(work, d, fmt.Sprintf("payload %s cannot be read: %v", p.Blob, ErrNoBlobService))
		return nil, "", false
	}
	if p.Kind == kindBatch {
		l.processBatch(run, work, d, p)
		return nil, "", false
	}
	lost, err := l.hidden(nil, work, d, func(ctx context.Context) error {
		f, err := l.cfg.Payloads.fetch(ctx, p)
		if err != nil {
			return err
		}
		text, err = singleText(f.data, l.cfg.PayloadLimits)
		return err
	})
	if err != nil || lost {
		l.payloadFailed(work, d, err, lost)
		return nil, "", false
	}
	return p, text, true
}

// singleText reads the one item of a single payload.
func singleText(data []byte, lim PayloadLimits) (string, error) {
	fr, err := newFrameReader(data, lim)
	if err != nil {
		return "", err
	}
	text, err := fr.next(false)
	if err == io.EOF {
		return "", fmt.Errorf("%w: no item", ErrPayloadCorrupt)
	}
	if err != nil {
		return "", err
	}
	if _, err := fr.next(true); err != io.EOF {
		return "", fmt.Errorf("%w: more than one item in a single payload", ErrPayloadCorrupt)
	}
	return text, nil
}

// payloadFailed settles a message whose payload could not be read. A
// missing, corrupt or oversized payload is poisoned (its blob, if any, kept
// and marked); a failed request is retried after the retry delay, like a
// failed handler, so that a payload that stays unreadable ends poisoned too.
func (l *Listener[T]) payloadFailed(work context.Context, d *Delivery, err error, lost bool) {
	ctx, cancel := settleContext(work)
	defer cancel()
	switch {
	case lost:
		l.stats.lost.Add(1)
		l.msgLog(d).Warn("ownership lost while reading the payload; the message will be delivered again", "err", err)
	case errors.Is(err, ErrPayloadMissing), errors.Is(err, ErrPayloadCorrupt), errors.Is(err, ErrPayloadTooLarge):
		l.poison(work, d, err.Error())
	case errors.Is(context.Cause(work), ErrDrainTimeout):
		l.count(l.release(ctx, d, 0), &l.stats.released)
	default:
		l.msgLog(d).Warn("cannot read the payload; retrying later", "err", err)
		l.count(l.release(ctx, d, l.cfg.Retry(d.DequeueCount)), &l.stats.retried)
	}
}

// removePayload deletes the blob of a message that has been deleted: the
// message first, so that a crash in between leaves waste (which Sweep
// removes), never a pointer to nothing.
func (l *Listener[T]) removePayload(ctx context.Context, d *Delivery, p *pointer) {
	if err := l.cfg.Payloads.remove(ctx, p.Blob); err != nil {
		l.msgLog(d).Warn("message deleted, but not its payload blob; Sweep will remove it", "blob", p.Blob, "err", err)
	}
}

// keepPayload marks the blob of a pointer message that is being poisoned, so
// that Sweep keeps it for as long as the envelope may be requeued. Text that
// is not a well-formed pointer makes no request. A blob that is missing or
// not ours has nothing to keep; any other failure is returned, and the
// message stays in its queue.
func (l *Listener[T]) keepPayload(ctx context.Context, d *Delivery) error {
	if !isPointer(d.Text) || l.cfg.Payloads == nil {
		return nil
	}
	// The format alone decides: a pointer beyond this listener's limits may
	// still be requeued to one with larger limits.
	p, err := parsePointer(d.Text, PayloadLimits{MaxBlobSize: math.MaxInt64, MaxItems: math.MaxInt})
	if err != nil {
		return nil
	}
	err = l.cfg.Payloads.markPoisoned(ctx, p.Blob, time.Now())
	if errors.Is(err, ErrPayloadMissing) || errors.Is(err, ErrPayloadCorrupt) {
		return nil
	}
	return err
}

// batchRun is one delivery of a batch being worked through.
type batchRun[T any] struct {
	l        *Listener[T]
	work     context.Context
	d        *Delivery
	p        *pointer
	done     *doneSet
	cancel   context.CancelCauseFunc // ends the batch's try
	stopping context.Context         // Run's: when it ends, no further item starts
	failed   atomic.Bool             // an item failed and waits for another try
	halted   atomic.Bool             // items were left unstarted because Run ended

	mu    sync.Mutex // serialises checkpoint writes and guards the fields below
	meta  blobMeta
	etag  azcore.ETag
	saved int // items done at the last checkpoint read or written
}

// processBatch reads a batch's blob, runs its items that are not done yet on
// the listener's shared item slots, and settles the message: deleted (then
// its blob) when every item is done, otherwise released for another try with
// a checkpoint of what is done.
func (l *Listener[T]) processBatch(run, work context.Context, d *Delivery, p *pointer) {
	ctx, cancel := context.WithCancelCause(work)
	defer cancel(nil)
	r := l.startRenewer(work, ctx, d, cancel)
	b := &batchRun[T]{l: l, work: work, d: d, p: p, cancel: cancel, stopping: run}
	err := b.run(ctx)
	lost := r.stop()
	if err != nil {
		l.payloadFailed(work, d, err, lost)
		return
	}
	b.settle(lost, context.Cause(ctx))
}

// run fetches and checks the payload, then runs the items.
func (b *batchRun[T]) run(ctx context.Context) error {
	lim := b.l.cfg.PayloadLimits
	f, err := b.l.cfg.Payloads.fetch(ctx, b.p)
	if err != nil {
		return err
	}
	if err := scanFrames(f.data, b.p.Items, lim); err != nil {
		return err
	}
	b.meta, b.etag = f.meta, f.etag
	b.done = newDoneSet(b.p.Items)
	b.done.merge(f.meta.done)
	b.saved = b.done.len()

	fr, err := newFrameReader(f.data, lim)
	if err != nil {
		return err
	}
	stopCheckpoints := b.checkpointEvery(ctx, b.l.cfg.CheckpointInterval)
	defer stopCheckpoints()
	var items sync.WaitGroup
	defer items.Wait()
	for i := range b.p.Items {
		skip := b.done.has(i)
		text, err := fr.next(skip)
		if err != nil {
			return err // scanFrames read the same bytes; this cannot happen
		}
		if skip {
			b.l.stats.itemsSkipped.Add(1)
			continue
		}
		if err := b.l.takeHandler(b.stopping, ctx); err != nil {
			// The try ended, or Run did: no further item starts.
			b.halted.Store(errors.Is(err, errNotStarted))
			return nil
		}
		items.Go(func() {
			defer b.l.giveHandler()
			b.runItem(ctx, i, text)
		})
	}
	return nil
}

// runItem decodes and handles one item and records its outcome.
func (b *batchRun[T]) runItem(ctx context.Context, i int, text string) {
	l, d := b.l, b.d
	l.stats.items.Add(1)
	var body T
	if err := l.decode(text, &body); err != nil {
		b.poisonItem(i, text, (&DecodeError{Err: err}).Error())
		return
	}
	m := &Message[T]{Body: body, ID: d.ID, DequeueCount: d.DequeueCount, InsertedAt: d.InsertedAt,
		Queue: d.QueueName(), BatchID: b.p.Blob, Item: i}
	ictx := ctx
	var timedOut atomic.Bool
	if l.cfg.HandlerTimeout > 0 {
		var stop context.CancelFunc
		ictx, stop = context.WithTimeoutCause(ctx, l.cfg.HandlerTimeout, ErrHandlerTimeout)
		defer stop()
		// An item past its timeout ends the batch's try: renewals stop, so
		// that the batch reappears even if the handler never returns, and
		// the checkpoint keeps what completed.
		defer context.AfterFunc(ictx, func() {
			if ctx.Err() == nil && errors.Is(context.Cause(ictx), ErrHandlerTimeout) {
				timedOut.Store(true)
				b.cancel(ErrHandlerTimeout)
			}
		})()
	}
	err := l.call(ictx, m)
	switch {
	case err == nil:
		b.done.add(i)
		l.stats.itemsSucceeded.Add(1)
	case ctx.Err() != nil && !timedOut.Load():
		// Cut short because the batch's try ended (shutdown, ownership
		// lost, another item's timeout): not this item's failure.
		b.failed.Store(true)
	case errors.As(err, new(*PermanentError)):
		l.stats.failed.Add(1)
		b.poisonItem(i, text, err.Error())
	default:
		l.failure(d, err, "item", i)
		if d.DequeueCount >= l.cfg.MaxDequeueCount {
			b.poisonItem(i, text, lastTry(d, err))
			return
		}
		l.msgLog(d).Info("item handler failed; retrying later", "item", i, "err", err)
		b.failed.Store(true)
	}
}

// poisonItem moves one item to the poison queue, in an envelope holding its
// text, and marks it done; the rest of the batch goes on. If the move fails
// the item stays undone, for the batch's next try.
func (b *batchRun[T]) poisonItem(i int, text, reason string) {
	l, d := b.l, b.d
	ctx, cancel := settleContext(b.work)
	defer cancel()
	env := newPoisonEnvelope(l.src.Name(), d, reason, time.Now())
	env.Batch, env.Item, env.Body = b.p.Blob, i, text
	out, err := envelopeText(ctx, env, l.cfg.Payloads, l.cfg.PayloadLimits)
	if err == nil {
		_, err = l.cfg.PoisonQueue.Send(ctx, out, &SendOptions{TTL: -1})
	}
	log := l.msgLog(d).With("item", i, "reason", reason)
	if err != nil {
		l.stats.poisonErrors.Add(1)
		log.Error("cannot move the item to the poison queue; the batch will try it again", "err", err)
		b.failed.Store(true)
		return
	}
	b.done.add(i)
	l.stats.itemsPoisoned.Add(1)
	log.Warn("batch item poisoned")
}

// settle ends the delivery. cause is why the batch's context ended, if it did.
func (b *batchRun[T]) settle(lost bool, cause error) {
	l, d := b.l, b.d
	ctx, cancel := settleContext(b.work)
	defer cancel()
	switch {
	case lost:
		b.checkpoint(ctx)
		l.stats.lost.Add(1)
		l.msgLog(d).Warn("ownership lost while running the batch; it will be delivered again", "done", b.done.len())
	case b.done.len() == b.p.Items:
		if err := l.src.Delete(ctx, d); err != nil {
			// Record that every item is done, so the next delivery only
			// deletes.
			b.checkpoint(ctx)
			l.stats.lost.Add(1)
			l.msgLog(d).Warn("batch done, but the delete failed; the message will be delivered again", "err", err)
			return
		}
		l.stats.succeeded.Add(1)
		l.removePayload(ctx, d, b.p)
	case b.halted.Load(), errors.Is(context.Cause(b.work), ErrDrainTimeout):
		// Shut down with items unstarted, or cut off by the drain: the
		// checkpoint keeps what is done; let another listener have the
		// rest now.
		b.checkpoint(ctx)
		l.count(l.release(ctx, d, 0), &l.stats.released)
	default:
		b.checkpoint(ctx)
		if errors.Is(cause, ErrHandlerTimeout) {
			l.msgLog(d).Warn("a batch item timed out; the batch is retried from its checkpoint", "done", b.done.len())
		}
		l.count(l.release(ctx, d, l.cfg.Retry(d.DequeueCount)), &l.stats.retried)
	}
}

// checkpoint records the done items on the blob if any completed since the
// last checkpoint. It merges what another receiver of the same message may
// have recorded meanwhile (the blob's ETag tells), so neither undoes the
// other. A failed write is logged: the items it would have saved run again.
func (b *batchRun[T]) checkpoint(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.done.len()
	if n == b.saved {
		return
	}
	var text string
	etag, err := b.l.cfg.Payloads.update(ctx, b.p.Blob, b.meta, b.etag, func(m *blobMeta) {
		b.done.merge(m.done)
		text = b.done.encode()
		m.done = text
	})
	if err != nil {
		b.l.msgLog(b.d).Warn("checkpoint not written; its items will run again", "blob", b.p.Blob, "err", err)
		return
	}
	b.meta.done, b.etag, b.saved = text, etag, n
	b.l.stats.checkpoints.Add(1)
}

// checkpointEvery writes a checkpoint every interval while the batch runs,
// so that a process that dies mid-batch loses at most that much work. It
// returns a function that stops it and waits for it.
func (b *batchRun[T]) checkpointEvery(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				b.checkpoint(ctx)
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}
