package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"
)

// Peek returns up to max (1 to [MaxBatch]) visible messages from the front of
// the queue without receiving them: they stay visible, keep their dequeue
// count, and no pop receipt is issued (the service's Peek Messages). Hidden
// messages (received and not yet settled, or sent with a delay) are not
// seen. A queue that does not exist has nothing to peek: Peek returns no
// messages and no error, as [Queue.Depth] returns 0. A peeked message is a
// [Delivery] with no Receipt and no NextVisibleAt: it cannot be deleted or
// hidden through it, and its DequeueCount is how often it has been
// received (a peek does not add to it).
//
// A peek is a billable request like any other; it is counted in
// [Transactions.Other], since it is neither a receive (it hides nothing) nor a
// read of the queue's properties.
func (q *Queue) Peek(ctx context.Context, max int) ([]*Delivery, error) {
	if err := checkCount("Peek's max", max); err != nil {
		return nil, err
	}
	resp, err := q.client.PeekMessages(tagRequest(ctx, opPeek, q.tx), &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(max))})
	if err != nil {
		if queueerror.HasCode(err, queueerror.QueueNotFound) {
			return nil, nil
		}
		return nil, storageError(opPeek, q.name, err)
	}
	out := make([]*Delivery, 0, len(resp.Messages))
	for _, m := range resp.Messages {
		if m == nil || m.MessageID == nil {
			continue // malformed response entry
		}
		out = append(out, &Delivery{
			ID:           *m.MessageID,
			Text:         deref(m.MessageText),
			DequeueCount: deref(m.DequeueCount),
			InsertedAt:   deref(m.InsertionTime),
			ExpiresAt:    deref(m.ExpirationTime),
			Queue:        q.name,
		})
	}
	return out, nil
}

// peeker is a shard that can peek, as a [*Queue] can.
type peeker interface {
	Peek(ctx context.Context, max int) ([]*Delivery, error)
}

// Peek returns up to max (1 to [MaxBatch]) visible messages from the front of
// each shard of this view, asked in parallel, in shard order (see
// [Queue.Peek]): up to max times the number of shards in all. It goes on past
// shards that fail or cannot peek (a shard of your own without a Peek
// method), and returns what the others hold with the failures joined.
// Shards backed off after failures are asked too: a peek is an operator's
// look, and should show what is there rather than what the sharded queue
// thinks of its shards.
func (s *ShardedQueue) Peek(ctx context.Context, max int) ([]*Delivery, error) {
	if err := checkCount("Peek's max", max); err != nil {
		return nil, err
	}
	got := make([][]*Delivery, len(s.members))
	errs := make([]error, len(s.members))
	var wg sync.WaitGroup
	for k, i := range s.members {
		sh := s.set.shards[i]
		p, ok := sh.(peeker)
		if !ok {
			errs[k] = fmt.Errorf("shard %q: cannot peek", sh.Name())
			continue
		}
		wg.Go(func() {
			msgs, err := p.Peek(ctx, max)
			got[k] = msgs
			if err != nil {
				errs[k] = fmt.Errorf("shard %q: %w", sh.Name(), err)
			}
		})
	}
	wg.Wait()
	var out []*Delivery
	for _, msgs := range got {
		out = append(out, msgs...)
	}
	return out, errors.Join(errs...)
}
