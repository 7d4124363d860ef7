package azdispatch

import (
	"context"
	"math"
	"runtime/metrics"
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
//
// The bytes held are live heap, and Go's collector lets the heap grow by
// GOGC percent of the live heap before it collects (100 % by default): a
// listener holding PayloadMemory bytes of payloads would show twice that.
// So the budget holds back that headroom: with GOGC at 100 it lets
// payloads take half of PayloadMemory live, and the heap they cause stays
// near PayloadMemory, garbage included.
type payloadBudget struct {
	sem  *semaphore.Weighted
	size int64        // what may be held live
	held atomic.Int64 // bytes reserved now, for State
}

// newPayloadBudget bounds the heap of payloads to about memory bytes under
// the collector's setting gogc (see gcPercent); memory <= 0 bounds nothing.
func newPayloadBudget(memory int64, gogc int) *payloadBudget {
	if memory <= 0 {
		return &payloadBudget{}
	}
	live := memory
	if gogc > 0 {
		live = int64(float64(memory) * 100 / float64(100+gogc))
	}
	live = max(live, 1)
	return &payloadBudget{sem: semaphore.NewWeighted(live), size: live}
}

// gcPercent is the collector's GOGC setting (100 unless GOGC or
// debug.SetGCPercent says otherwise); 0 when the collector is off, which
// leaves the heap to GOMEMLIMIT.
func gcPercent() int {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	v := sample[0].Value.Uint64()
	if v > math.MaxInt32 { // off
		return 0
	}
	return int(v)
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
		ctx, done := t.untilRunEnds()
		err := b.sem.Acquire(ctx, n)
		done()
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
