package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// batchRun is one delivery of a batch being worked through: its items run
// in parallel on the listener's handler tokens, each judged like a single
// message, and a checkpoint on the blob records the ones done.
type batchRun[T any] struct {
	l      *Listener[T]
	t      *try
	p      *payload.Pointer
	done   *payload.DoneSet
	halted bool // Run ended with items unstarted; written before the items are waited for

	// pending counts the items running, and one more while items are
	// still being started; allDone is closed when it drops to zero.
	pending atomic.Int64
	allDone chan struct{}
	// running holds the text of each item running, by index, so that
	// items abandoned in their handlers can still be settled; abandoned is
	// set once they are, and what such an item returns later is ignored.
	runMu     sync.Mutex
	running   map[int]string
	abandoned bool

	mu    sync.Mutex // serialises checkpoint writes and guards the fields below
	meta  payload.Meta
	etag  azcore.ETag
	saved int // items done at the last checkpoint read or written
}

// runBatch reads a batch's blob, runs the items that are not done yet, and
// says what becomes of the message: deleted (then its blob) when every item
// is done, otherwise released for another try, with a checkpoint of what is
// done.
func (l *Listener[T]) runBatch(t *try, p *payload.Pointer) action {
	// The blob is held while the items run, and one item's text is
	// inflated at a time; the items in their handlers are bounded by the
	// handler tokens, not counted here.
	if err := l.budget.take(t, p.Size+int64(l.limits.MaxItemSize)); err != nil {
		return l.judge(t, t.ctx, err)
	}
	f, err := l.fetch(t, p)
	if err == nil {
		// The whole payload is checked before its first item runs.
		err = payload.Scan(f.data, p.Items, l.limits)
	}
	if err != nil {
		return l.payloadFailed(t, err)
	}
	b := &batchRun[T]{l: l, t: t, p: p, meta: f.meta, etag: f.etag, done: payload.NewDoneSet(p.Items)}
	b.done.Merge(f.meta.Done)
	b.saved = b.done.Len()
	t.blob, t.saveProgress = p, b.checkpoint
	if err := b.runItems(f.data); err != nil {
		return l.payloadFailed(t, err)
	}
	switch {
	case b.done.Len() == p.Items:
		return action{kind: actDone}
	case b.halted:
		// Shut down with items unstarted: the checkpoint keeps what is
		// done; let another listener have the rest now.
		return action{kind: actRelease}
	case t.ctx.Err() != nil:
		return l.interrupted(t)
	}
	return action{kind: actRetry, err: errors.New("batch items left to do")}
}

// runItems starts each item not done yet once a handler token is free, and
// waits for them. No further item starts once the try or Run has ended.
func (b *batchRun[T]) runItems(data []byte) error {
	l, t := b.l, b.t
	fr, err := payload.NewReader(data, l.limits)
	if err != nil {
		return err
	}
	stopCheckpoints := b.checkpointEvery(l.opts.CheckpointInterval)
	defer stopCheckpoints()
	b.allDone, b.running = make(chan struct{}), map[int]string{}
	b.pending.Store(1) // the loop below, until it has started every item
	defer b.waitItems()
	for i := range b.p.Items {
		skip := b.done.Has(i)
		text, err := fr.Next(skip)
		if err != nil {
			return err // Scan read the same bytes; this cannot happen
		}
		if skip {
			l.stats.itemsSkipped.Add(1)
			continue
		}
		if err := l.takeHandler(t); err != nil {
			b.halted = errors.Is(err, errNotStarted)
			return nil
		}
		b.started(i, text)
		// Owned by the session, not by this batch alone: an item that
		// ignores its context is waited for, and reported, by Run.
		t.s.handlers.Go(func() {
			defer b.release()
			defer l.giveHandler()
			b.runItem(i, text)
		})
	}
	return nil
}

// started records item i as running.
func (b *batchRun[T]) started(i int, text string) {
	b.pending.Add(1)
	b.runMu.Lock()
	b.running[i] = text
	b.runMu.Unlock()
}

// finish takes item i out of the running ones before its outcome is
// recorded. It reports false if the item was abandoned meanwhile: its
// batch has been settled without it, and its outcome is not recorded.
func (b *batchRun[T]) finish(i int) bool {
	b.runMu.Lock()
	defer b.runMu.Unlock()
	if b.abandoned {
		return false
	}
	delete(b.running, i)
	return true
}

// release drops one count of pending, and tells the waiter when none is left.
func (b *batchRun[T]) release() {
	if b.pending.Add(-1) == 0 {
		close(b.allDone)
	}
}

// waitItems waits for the items started. If the try ends because an item
// timed out and then did not return (see handlerCall), the items still
// running are abandoned to their goroutines: the batch is settled without
// them, and an abandoned item on the batch's last try is poisoned alone,
// as an item that failed there would be.
func (b *batchRun[T]) waitItems() {
	b.release()
	select {
	case <-b.allDone:
		return
	case <-b.t.ctx.Done():
	}
	if !errors.Is(context.Cause(b.t.ctx), ErrHandlerTimeout) {
		<-b.allDone // the items end with the try; their outcomes count
		return
	}
	l, d := b.l, b.t.d
	b.runMu.Lock()
	b.abandoned = true
	hung := maps.Clone(b.running)
	b.runMu.Unlock()
	for i, text := range hung {
		err := fmt.Errorf("%w after %v, and did not return", ErrHandlerTimeout, l.opts.HandlerTimeout)
		l.failed(d, err)
		l.msgLog(d).Error("batch item ignores its cancelled context; its batch goes on without it", "item", i)
		if d.DequeueCount >= l.opts.MaxDequeueCount {
			b.poisonItem(i, text, fmt.Sprintf("failed %d times; last error: %v", d.DequeueCount, err))
		}
	}
}

// runItem decodes and handles one item and records its outcome.
func (b *batchRun[T]) runItem(i int, text string) {
	l, d := b.l, b.t.d
	l.stats.items.Add(1)
	item := &struct {
		call handlerCall
		m    Message[T]
	}{}
	m := &item.m
	if err := l.decode(text, &m.Body); err != nil {
		if b.finish(i) {
			b.poisonItem(i, text, (&DecodeError{Err: err}).Error())
		}
		return
	}
	m.ID, m.DequeueCount, m.InsertedAt, m.Queue, m.BatchID, m.Item = d.ID, d.DequeueCount, d.InsertedAt, d.Queue, b.p.Blob, i
	// Its own context, which its timeout cancels without ending the
	// batch's try (see handlerCall).
	var cancel context.CancelCauseFunc
	item.call.Context, cancel = context.WithCancelCause(b.t.ctx)
	item.call.cancel = cancel
	a := l.runHandler(b.t, &item.call, m, len(text))
	cancel(nil)
	if !b.finish(i) {
		return
	}
	switch a.kind {
	case actDone:
		b.done.Add(i)
		l.stats.itemsSucceeded.Add(1)
	case actPoison:
		b.poisonItem(i, text, a.reason)
	case actRetry:
		if b.t.ctx.Err() == nil { // the item's own failure, not its batch's end
			l.msgLog(d).Info("batch item failed; the batch retries it later", "item", i, "err", a.err)
		}
	}
	// Any other action leaves the item undone, for the batch's next try:
	// the batch as a whole is settled when its items are over.
}

// poisonItem moves one item to the poison queue, in an envelope holding its
// text, and marks it done; the rest of the batch goes on. If the move fails
// the item stays undone, for the batch's next try.
func (b *batchRun[T]) poisonItem(i int, text, reason string) {
	l, d := b.l, b.t.d
	ctx := b.t.s.settle.get()
	env := newPoisonEnvelope(l.src.Name(), d, reason, time.Now())
	env.Batch, env.Item, env.Body = b.p.Blob, i, text
	// The batch's metadata goes with the item, so that a requeued item
	// carries its trace context as a single message would. Metadata that
	// was read from the queue encodes again.
	if line, err := b.t.meta.line(); err == nil {
		env.Body = line + text
	}
	log := l.msgLog(d).With("item", i, "reason", reason)
	if err := l.sendPoison(ctx, d, b.t.origin, env); err != nil {
		l.stats.poisonErrors.Add(1)
		log.Error("cannot move the item to the poison queue; the batch will try it again", "err", err)
		return
	}
	b.done.Add(i)
	l.stats.itemsPoisoned.Add(1)
	log.Warn("batch item poisoned")
}

// checkpoint records the done items on the blob if any completed since the
// last checkpoint. It merges what another receiver of the same message may
// have recorded meanwhile (the blob's ETag tells), so neither undoes the
// other. A failed write is logged: the items it would have saved run again.
func (b *batchRun[T]) checkpoint(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.done.Len()
	if n == b.saved {
		return
	}
	var text string
	etag, err := b.l.opts.Payloads.update(ctx, b.p.Blob, b.meta, b.etag, func(m *payload.Meta) {
		b.done.Merge(m.Done)
		text = b.done.Encode()
		m.Done = text
	})
	if err != nil {
		b.l.msgLog(b.t.d).Warn("checkpoint not written; its items will run again", "blob", b.p.Blob, "err", err)
		return
	}
	b.meta.Done, b.etag, b.saved = text, etag, n
	b.l.stats.checkpoints.Add(1)
}

// checkpointEvery writes a checkpoint every interval while the batch runs,
// so that a process that dies mid-batch loses at most that much work. It
// returns a function that stops it and waits for it.
func (b *batchRun[T]) checkpointEvery(interval time.Duration) (stop func()) {
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
			case <-b.t.ctx.Done():
				return
			case <-t.C:
				b.checkpoint(b.t.ctx)
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}
