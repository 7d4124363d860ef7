package azdispatch

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// defaultPayloadMemory is ListenerOptions.PayloadMemory's default: room for
// a few large payloads in a small container, far from the gigabytes that
// 512 messages of 16 MiB each would take.
const defaultPayloadMemory = 256 << 20

// payloadBudget bounds the bytes of offloaded payloads a listener holds in
// memory at once. A message reserves its share before its blob is
// downloaded, and waits while the budget is spent; what it holds is given
// back when it is settled. A nil budget bounds nothing.
type payloadBudget struct {
	sem  *semaphore.Weighted
	size int64
	held atomic.Int64 // bytes reserved now, for State
}

func newPayloadBudget(size int64) *payloadBudget {
	if size <= 0 {
		return &payloadBudget{}
	}
	return &payloadBudget{sem: semaphore.NewWeighted(size), size: size}
}

// take reserves n bytes for t (all of the budget if n is more), waiting
// while they are spent. It fails with the try's cause if the try ends, or
// with errNotStarted if Run's context ends, while it waits.
func (b *payloadBudget) take(t *try, n int64) error {
	if b.sem == nil {
		return nil
	}
	n = min(n, b.size)
	if !b.sem.TryAcquire(n) {
		ctx, cancel := context.WithCancel(t.ctx)
		stop := context.AfterFunc(t.s.run, cancel)
		err := b.sem.Acquire(ctx, n)
		stop()
		cancel()
		if err != nil {
			if t.ctx.Err() != nil {
				return context.Cause(t.ctx)
			}
			return errNotStarted
		}
	}
	t.payloadHeld += n
	b.held.Add(n)
	return nil
}

// shrink gives back what t holds beyond keep bytes: a downloaded message
// keeps only its text once the blob's bytes are let go.
func (b *payloadBudget) shrink(t *try, keep int64) {
	if extra := t.payloadHeld - max(keep, 0); b.sem != nil && extra > 0 {
		t.payloadHeld -= extra
		b.held.Add(-extra)
		b.sem.Release(extra)
	}
}

// give returns everything t holds.
func (b *payloadBudget) give(t *try) { b.shrink(t, 0) }
