package payload

import (
	"context"
	"math"
	"runtime/metrics"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Budget bounds the bytes of offloaded payloads a listener holds in memory
// at once. A message reserves its share before its blob is downloaded, and
// waits while the budget is spent; what it holds is given back when it is
// settled. A Budget of no memory bounds nothing.
//
// The bytes held are live heap, and Go's collector lets the heap grow by
// GOGC percent of the live heap before it collects (100 % by default): a
// listener holding its whole budget of payloads would show twice that. So
// the budget holds back that headroom: with GOGC at 100 it lets payloads
// take half of the memory live, and the heap they cause stays near the
// memory, garbage included.
type Budget struct {
	sem  *semaphore.Weighted
	size int64        // what may be held live
	held atomic.Int64 // bytes reserved now
}

// NewBudget bounds the heap of payloads to about memory bytes under the
// collector's setting gogc (see GCPercent); memory <= 0 bounds nothing.
func NewBudget(memory int64, gogc int) *Budget {
	if memory <= 0 {
		return &Budget{}
	}
	live := memory
	if gogc > 0 {
		live = int64(float64(memory) * 100 / float64(100+gogc))
	}
	live = max(live, 1)
	return &Budget{sem: semaphore.NewWeighted(live), size: live}
}

// GCPercent is the collector's GOGC setting (100 unless GOGC or
// debug.SetGCPercent says otherwise); 0 when the collector is off, which
// leaves the heap to GOMEMLIMIT.
func GCPercent() int {
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

// TryTake reserves n bytes (all of the budget if n is more) if they are
// free now, and returns what it reserved.
func (b *Budget) TryTake(n int64) (int64, bool) {
	if b.sem == nil {
		return 0, true
	}
	n = min(n, b.size)
	if !b.sem.TryAcquire(n) {
		return 0, false
	}
	b.held.Add(n)
	return n, true
}

// Take reserves n bytes (all of the budget if n is more), waiting while
// they are spent, and returns what it reserved; it fails with ctx's error
// if ctx ends first.
func (b *Budget) Take(ctx context.Context, n int64) (int64, error) {
	if b.sem == nil {
		return 0, nil
	}
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	b.held.Add(n)
	return n, nil
}

// Give returns n bytes reserved before.
func (b *Budget) Give(n int64) {
	if b.sem != nil && n > 0 {
		b.held.Add(-n)
		b.sem.Release(n)
	}
}

// Held is the bytes reserved now.
func (b *Budget) Held() int64 { return b.held.Load() }
