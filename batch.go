package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azdispatch/azdispatch/internal/gather"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/route"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// A batch is many items in one payload blob behind one pointer message:
// sent by SendBatch below, and tried by a listener item by item, with a
// checkpoint on the blob of the items done (batchTry).

// SendBatch sends items as one batch: their encoded texts, compressed
// together into one blob in the payload store, and one small pointer message
// on the queue. A listener calls its handler once per item, in any order and
// in parallel (within the listener's [ScalingOptions.MaxDequeuers] ×
// [ListenerOptions.Concurrency] handler calls at once, shared with single
// messages and other batches), with the same outcome rules as for single
// messages; items that succeed are not run again when the batch is redelivered,
// and one item that keeps failing is poisoned alone. A batch costs about six
// requests end to end, whatever n (write the blob, send the pointer, a share of
// a receive, read the blob, delete the message, delete the blob), where n
// single messages cost about 2n.
//
// opts are those of [Publisher.SendWith] (nil: sent visible at once): a
// batch can be delayed, by any length, keyed, made unique and cancelled like
// a single message, and its blob lives as long as its pointer message. It
// returns the [Sent] of its pointer message, with [Sent.BatchID],
// [Sent.Items] and [Sent.BatchBytes] set.
//
// It fails before any request with a [*ConfigError] for no items or bad
// options, with [ErrNoBlobService] when the publisher has no payload store,
// and with [ErrMessageTooLarge] when the batch exceeds the publisher's
// [PayloadLimits] (the error names the limit to raise).
func (p *Publisher[T]) SendBatch(ctx context.Context, items []T, opts *SendOptions) (Sent, error) {
	if len(items) == 0 {
		return Sent{}, &ConfigError{Field: "items", Reason: "empty: a batch needs at least one"}
	}
	if p.store == nil {
		return Sent{}, wrapf(p.noStore(), "send batch")
	}
	o, r, err := p.routeFor(ctx, opts)
	if err != nil {
		return Sent{}, err
	}
	if o.Track {
		return Sent{}, &ConfigError{Field: "SendOptions.Track", Reason: "a batch is not tracked: send each message on its own"}
	}
	if r.Group != "" {
		return Sent{}, &ConfigError{Field: "SendOptions.Group", Reason: "a batch is not a group's child: send each child on its own"}
	}
	var m sentMessage
	var ptr *wire.Pointer
	err = p.unique(ctx, o, func() error {
		if p.mw == nil {
			m, ptr, _, err = p.sendBatch(ctx, items, nil, r)
			return err
		}
		s := p.outgoing(&items, r)
		s.Items, s.isBatch = len(items), true
		err := s.Next(ctx)
		m, ptr, r = s.sent, s.batch, s.route
		return err
	})
	if err != nil || ptr == nil { // nil: a middleware sent nothing
		return Sent{}, err
	}
	sent := p.sent(m, r)
	sent.BatchID, sent.Items, sent.BatchBytes = ptr.Blob, ptr.Items, ptr.Size
	return sent, nil
}

// sendBatch is SendBatch past the middleware, with the metadata to carry,
// sent as r says. It returns what the target said of the pointer message,
// the pointer, and the length of the pointer message's text.
func (p *Publisher[T]) sendBatch(ctx context.Context, items []T, meta Metadata, r route.Route) (sentMessage, *wire.Pointer, int, error) {
	fail := func(err error) (sentMessage, *wire.Pointer, int, error) { return sentMessage{}, nil, 0, err }
	msg := wire.Text{Due: p.policy.DueLine(r)}
	meta, stamp := p.withEntries(meta, r)
	var err error
	if msg.Meta, err = wire.NewMeta(meta); err != nil {
		return fail(err)
	}
	w := payload.NewWriter(p.limits)
	for i, item := range items {
		text, err := p.codec.Encode(item)
		if err != nil {
			return fail(wrapf(err, "encode item %d", i))
		}
		if err := w.Add(text); err != nil {
			return fail(limitOption(err, "PublisherOptions"))
		}
	}
	ptr, err := p.offload(ctx, payload.KindBatch, w, r)
	if err != nil {
		return fail(limitOption(err, "PublisherOptions"))
	}
	msg.Pointer = ptr
	text := msg.Render()
	m, err := p.deliver(ctx, text, r)
	p.keySent(r.Key, stamp, err)
	if err != nil {
		return fail(err)
	}
	m.Blob = ptr.Blob
	return m, ptr, len(text), nil
}

// batchTry is one delivery of a batch being tried: its items run
// in parallel on the listener's handler tokens, each judged like a single
// message, and a checkpoint on the blob records the ones done.
type batchTry[T any] struct {
	l      *Listener[T]
	t      *try
	p      *wire.Pointer
	done   *payload.DoneSet
	halted bool // Run ended with items unstarted; written before the items are waited for

	// pending counts the items running, and one more while items are
	// still being started; allDone is closed when it drops to zero.
	pending atomic.Int64
	allDone chan struct{}
	// running holds each item running, by index. An item leaves it once,
	// when its outcome is recorded: when it returns, or when it is
	// abandoned in a handler that ignores its cancelled context (what it
	// returns later is then ignored).
	runMu   sync.Mutex
	running map[int]string

	mu    sync.Mutex // serialises checkpoint writes and guards the fields below
	meta  payload.Meta
	etag  azcore.ETag
	saved int // items done at the last checkpoint read or written
	// turn is the batch's turn under a rate limit, booked at its receive,
	// for the first item it runs; zero once taken, and each item after
	// waits for a turn of its own.
	turn time.Time

	// The memory the batch's items hold (see itemMemory), under memMu:
	// how many items hold some, whether the batch's own room to read an
	// item is lent to one, and, while the loop waits for memory, what
	// wakes it when an item gives its memory back.
	memMu    sync.Mutex
	holders  int
	roomLent bool
	wake     context.CancelFunc
}

// itemHold is the memory one batch item holds while its handler has it:
// bytes of the listener's budget, or the batch's own room.
type itemHold struct {
	bytes int64
	room  bool
}

// tryBatch reads a batch's blob, runs the items that are not done yet, and
// says what becomes of the message: deleted (then its blob) when every item
// is done, otherwise released for another try, with a checkpoint of what is
// done.
func (l *Listener[T]) tryBatch(t *try, p *wire.Pointer, turn time.Time) action {
	// The blob is held while the items run, and room to read one item's
	// text (the largest a pointer may have, until the blob says how large
	// its items are). Every item in a handler holds memory of its own
	// besides (see itemMemory): a batch of small blobs may inflate to far
	// more than its blob.
	if err := l.takePayload(t, p.Size+int64(l.limits.MaxItemSize)); err != nil {
		return l.judge(t, t.context(), err)
	}
	f, err := l.fetch(t, p)
	largest := 0
	if err == nil {
		// The whole payload is checked before its first item runs.
		largest, err = payload.Scan(f.data, p.Items, l.limits)
	}
	if err != nil {
		return l.payloadFailed(t, err)
	}
	l.shrinkPayload(t, p.Size+int64(largest))
	b := &batchTry[T]{l: l, t: t, p: p, meta: f.meta, etag: f.etag, done: payload.NewDoneSet(p.Items), turn: turn}
	b.done.Merge(f.meta.Done)
	b.saved = b.done.Len()
	t.blob, t.saveProgress = p, b.checkpoint
	if err := b.tryItems(f.data); err != nil {
		return l.payloadFailed(t, err)
	}
	switch {
	case b.done.Len() == p.Items:
		return action{kind: actDone}
	case b.halted:
		// Shut down with items unstarted: the checkpoint keeps what is
		// done; let another listener have the rest now.
		return action{kind: actReappearNow}
	case t.ended():
		return l.interrupted(t)
	}
	return action{kind: actRetry, err: errors.New("batch items left to do")}
}

// tryItems starts each item not done yet once a handler token is free, and
// waits for them. No further item starts once the try or Run has ended.
func (b *batchTry[T]) tryItems(data []byte) error {
	l, t := b.l, b.t
	fr, err := payload.NewReader(data, l.limits)
	if err != nil {
		return err
	}
	stopCheckpoints := b.checkpointEvery(l.opts.Payloads.CheckpointInterval)
	defer stopCheckpoints()
	b.allDone, b.running = make(chan struct{}), map[int]string{}
	b.pending.Store(1) // the loop below, until it has started every item
	defer b.waitItems()
	var group *gather.Group
	if l.batch != nil {
		// For a batch handler, the items are the messages that gather,
		// this loop on its way until it has started every item.
		t.seat.Leave()
		group = l.batch.gather.NewGroup(1)
		t.seat.Sit(group)
		defer t.seat.Leave()
	}
	for i := range b.p.Items {
		skip := b.done.Has(i)
		if !skip {
			// The next item is read into the batch's room: once it is
			// back from the item it was lent to, if it was.
			if err := b.roomBack(); err != nil {
				b.halted = errors.Is(err, errNotStarted)
				return nil
			}
		}
		text, err := fr.Next(skip)
		if err != nil {
			return err // Scan read the same bytes; this cannot happen
		}
		if skip {
			l.stats.itemsSkipped.Add(1)
			continue
		}
		turn := b.turn
		b.turn = time.Time{}
		var hold itemHold
		var place handlerHold
		err = l.waitTurn(t, turn)
		if err == nil {
			hold, err = b.itemMemory(int64(len(text)))
		}
		if err == nil {
			if place, err = l.takeHandler(t, 0); err != nil { // items wait: their batch is one message
				b.giveItemMemory(hold)
			}
		}
		if err != nil {
			b.halted = errors.Is(err, errNotStarted)
			return nil
		}
		group.Add(1)
		b.started(i, text)
		// Owned by the session, not by this batch alone: an item that
		// ignores its context is waited for, and reported, by Run. Its
		// memory is given back when it returns, abandoned or not: its
		// handler holds the text until then.
		t.s.handlers.Go(func() {
			defer b.giveItemMemory(hold)
			defer l.giveHandler(place)
			defer b.exited(i)
			b.tryItem(i, text, group)
		})
	}
	return nil
}

// itemMemory reserves n bytes for the text of an item about to start: from
// the listener's payload budget, if they are free now; otherwise, if no
// other item of the batch holds memory, the batch's own room to read an
// item, in which its text is already (the next item is then read once it
// is back); otherwise it waits for the budget, looking again whenever an
// item of the batch gives its memory back. So a batch always makes
// progress, one item at a time when the budget is spent, and every item's
// text counts against [PayloadOptions.Memory], however small its
// blob. It fails as takePayload does.
func (b *batchTry[T]) itemMemory(n int64) (itemHold, error) {
	l, t := b.l, b.t
	for {
		if got, ok := l.budget.TryTake(n); ok {
			b.memMu.Lock()
			b.holders++
			b.memMu.Unlock()
			return itemHold{bytes: got}, nil
		}
		b.memMu.Lock()
		if b.holders == 0 {
			b.holders++
			b.roomLent = true
			b.memMu.Unlock()
			return itemHold{room: true}, nil
		}
		ctx, done := t.untilRunEnds()
		wctx, wake := context.WithCancel(ctx)
		b.wake = wake
		b.memMu.Unlock()
		got, err := l.budget.Take(wctx, n)
		b.memMu.Lock()
		b.wake = nil
		if err == nil {
			b.holders++
		}
		b.memMu.Unlock()
		woken := err != nil && ctx.Err() == nil
		wake()
		done()
		switch {
		case err == nil:
			return itemHold{bytes: got}, nil
		case woken:
			continue
		case t.ended():
			return itemHold{}, t.cause()
		}
		return itemHold{}, errNotStarted
	}
}

// giveItemMemory gives back what an item held, and wakes the batch's loop
// if it waits for memory or for its room.
func (b *batchTry[T]) giveItemMemory(h itemHold) {
	b.l.budget.Give(h.bytes)
	b.memMu.Lock()
	defer b.memMu.Unlock()
	b.holders--
	if h.room {
		b.roomLent = false
	}
	if b.wake != nil {
		b.wake()
		b.wake = nil
	}
}

// roomBack waits until the batch's room to read an item is back from the
// item it was lent to, if it was. It fails as takePayload does.
func (b *batchTry[T]) roomBack() error {
	t := b.t
	for {
		b.memMu.Lock()
		if !b.roomLent {
			b.memMu.Unlock()
			return nil
		}
		ctx, done := t.untilRunEnds()
		wctx, wake := context.WithCancel(ctx)
		b.wake = wake
		b.memMu.Unlock()
		<-wctx.Done()
		b.memMu.Lock()
		b.wake = nil
		b.memMu.Unlock()
		woken := ctx.Err() == nil
		wake()
		done()
		switch {
		case woken:
			continue
		case t.ended():
			return t.cause()
		}
		return errNotStarted
	}
}

// started records item i as running.
func (b *batchTry[T]) started(i int, text string) {
	b.pending.Add(1)
	b.runMu.Lock()
	b.running[i] = text
	b.runMu.Unlock()
}

// finish takes item i out of the running ones, to record its outcome and
// then release it. It reports false if the item is no longer running: it
// was abandoned, and its outcome has been recorded already.
func (b *batchTry[T]) finish(i int) (text string, ok bool) {
	b.runMu.Lock()
	defer b.runMu.Unlock()
	text, ok = b.running[i]
	delete(b.running, i)
	return text, ok
}

// abandonItem goes on without item i, whose handler timed out and has not
// returned a grace period later (see handlerCall.expire): it keeps its
// handler token until it returns, but the batch no longer waits for it.
// It counts as failed, and on the batch's last try it is poisoned alone.
// The watch calls it, and must not wait: the work goes to a goroutine of
// the session.
func (b *batchTry[T]) abandonItem(i int) {
	b.t.s.handlers.Go(func() {
		text, ok := b.finish(i)
		if !ok {
			return // it returned meanwhile
		}
		defer b.release()
		l, d := b.l, b.t.d
		l.msgLog(d).Error("batch item ignores its cancelled context; its batch goes on without it", "item", i)
		b.record(i, text, l.judge(b.t, b.t.context(),
			fmt.Errorf("%w after %v, and did not return", ErrHandlerTimeout, l.opts.HandlerTimeout)))
	})
}

// exited ends item i if its goroutine ends without its outcome recorded:
// the handler called runtime.Goexit (as testing's FailNow does). It counts
// as a failed call.
func (b *batchTry[T]) exited(i int) {
	text, ok := b.finish(i)
	if !ok {
		return
	}
	defer b.release()
	b.record(i, text, b.l.judge(b.t, b.t.context(), errHandlerExited))
}

// release drops one count of pending, and tells the waiter when none is left.
func (b *batchTry[T]) release() {
	if b.pending.Add(-1) == 0 {
		close(b.allDone)
	}
}

// waitItems waits for the outcomes of the items started: each item's, or
// its abandonment's (see abandonItem).
func (b *batchTry[T]) waitItems() {
	b.release()
	<-b.allDone
}

// tryItem decodes and handles one item and records its outcome.
func (b *batchTry[T]) tryItem(i int, text string, group *gather.Group) {
	l, d := b.l, b.t.d
	l.stats.items.Add(1)
	item := &struct {
		call handlerCall
		own  itemCall
		m    Message[T]
	}{}
	item.own.seat.Sit(group)
	defer item.own.seat.Leave()
	m := &item.m
	if err := l.decode(text, &m.Body); err != nil {
		if _, ok := b.finish(i); ok {
			defer b.release()
			b.poisonItem(i, text, decodeFailed(err))
		}
		return
	}
	m.ID, m.DequeueCount, m.InsertedAt, m.Queue, m.BatchID, m.Item = d.ID, d.DequeueCount, d.InsertedAt, d.Queue, b.p.Blob, i
	m.TimeInQueue, m.Key = b.t.waited, b.t.key
	// Its own context, which its timeout cancels without ending the
	// batch's try (see handlerCall).
	var cancel context.CancelCauseFunc
	item.call.Context, cancel = context.WithCancelCause(b.t.context())
	item.own.cancel, item.own.batch, item.own.index = cancel, b, i
	item.call.item = &item.own
	err := l.callWatched(b.t, &item.call, m, len(text))
	cancel(nil)
	if _, ok := b.finish(i); !ok {
		return // abandoned: its outcome is recorded
	}
	defer b.release()
	b.record(i, text, l.judge(b.t, &item.call, err))
}

// record carries out item i's action a.
func (b *batchTry[T]) record(i int, text string, a action) {
	l, d := b.l, b.t.d
	switch a.kind {
	case actDone:
		b.done.Add(i)
		l.stats.itemsSucceeded.Add(1)
	case actPoison:
		b.poisonItem(i, text, a.reason)
	case actRetry:
		if !b.t.ended() { // the item's own failure, not its batch's end
			l.msgLog(d).Info("batch item failed; the batch retries it later", "item", i, "err", a.err)
		}
	}
	// Any other action leaves the item undone, for the batch's next try:
	// the batch as a whole is settled when its items are over.
}

// poisonItem moves one item to the poison queue, in an envelope holding its
// text, and marks it done; the rest of the batch goes on. If the move fails
// the item stays undone, for the batch's next try.
func (b *batchTry[T]) poisonItem(i int, text, reason string) {
	l, d := b.l, b.t.d
	ctx := b.t.s.settle.Get()
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
func (b *batchTry[T]) checkpoint(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.done.Len()
	if n == b.saved {
		return
	}
	var text string
	etag, err := b.l.opts.Payloads.Store.update(ctx, b.p.Blob, b.meta, b.etag, func(m *payload.Meta) {
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
func (b *batchTry[T]) checkpointEvery(interval time.Duration) (stop func()) {
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
			case <-b.t.context().Done():
				return
			case <-t.C:
				b.checkpoint(b.t.context())
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}
