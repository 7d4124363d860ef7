package azdispatch

import (
	"context"
	"time"
)

// handle runs the handler for m through the middleware, if any. Without
// middleware it is the handler call alone: no Call is made, nothing is
// allocated, and a message in hand carries no room for one.
func (l *Listener[T]) handle(ctx context.Context, t *try, m *Message[T], size int) error {
	if l.mw == nil {
		return l.call(ctx, m)
	}
	c := &Call{
		ID: m.ID, Queue: m.Queue, DequeueCount: m.DequeueCount, InsertedAt: m.InsertedAt,
		BatchID: m.BatchID, Item: m.Item, Size: size, Body: &m.Body, Metadata: t.meta,
		chain: l.mw, handler: l.invoke, msg: m,
	}
	return c.runChain(ctx)
}

// invokeHandler is the end of every middleware chain: the handler itself.
func (l *Listener[T]) invokeHandler(ctx context.Context, c *Call) error {
	return l.call(ctx, c.msg.(*Message[T]))
}

// The listener's storage requests for messages go through these, so that
// a StorageMiddleware sees them; without one they are the source's calls.

func (l *Listener[T]) srcReceive(ctx context.Context, max int) ([]*Delivery, error) {
	if l.storage == nil {
		return l.src.Receive(ctx, max, l.opts.VisibilityTimeout)
	}
	op := &StorageOp{Kind: OpReceive, Max: max, Item: -1}
	err := l.runStorage(ctx, op)
	return op.Received, err
}

func (l *Listener[T]) srcDelete(ctx context.Context, d *Delivery) error {
	if l.storage == nil {
		return l.src.Delete(ctx, d)
	}
	return l.runStorage(ctx, &StorageOp{Kind: OpDelete, Message: d, Item: -1})
}

func (l *Listener[T]) srcRelease(ctx context.Context, d *Delivery, after time.Duration) error {
	if l.storage == nil {
		return l.src.SetVisibility(ctx, d, after)
	}
	return l.runStorage(ctx, &StorageOp{Kind: OpUpdate, Message: d, After: after, Item: -1})
}

// poisonSend puts an envelope's text on the poison queue, routed by origin
// (see sendPoison).
func (l *Listener[T]) poisonSend(ctx context.Context, d *Delivery, env *PoisonEnvelope, text string, origin any) error {
	if l.storage == nil {
		return l.sendEnvelope(ctx, origin, text)
	}
	item := -1
	if env.Batch != "" {
		item = env.Item
	}
	return l.runStorage(ctx, &StorageOp{Kind: OpSend, Message: d, Reason: env.Reason, Item: item, text: text, origin: origin})
}

// runStorage sends op through the storage middleware to the request.
func (l *Listener[T]) runStorage(ctx context.Context, op *StorageOp) error {
	op.Queue, op.chain, op.do = l.src.Name(), l.storage, l.doStorage
	if op.Message != nil {
		op.Queue = op.Message.Queue // the shard, as Call.Queue names it
	}
	return op.Next(ctx)
}

// storageRequest is the end of every storage middleware chain: the request.
func (l *Listener[T]) storageRequest(ctx context.Context, op *StorageOp) error {
	switch op.Kind {
	case OpReceive:
		var err error
		op.Received, err = l.src.Receive(ctx, op.Max, l.opts.VisibilityTimeout)
		return err
	case OpDelete:
		return l.src.Delete(ctx, op.Message)
	case OpUpdate:
		return l.src.SetVisibility(ctx, op.Message, op.After)
	default: // OpSend
		return l.sendEnvelope(ctx, op.origin, op.text)
	}
}
