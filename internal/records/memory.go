package records

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/syncx"
)

// Memory is a Store in memory, on a clock of the caller's: the records of
// an in-memory queue. It is safe for concurrent use.
type Memory struct {
	now func() time.Time
	// moved, if set, subscribes a function to every move of a clock that
	// moves only when told to, so that Sleep follows it.
	moved func(wake func()) (cancel func())

	mu      sync.Mutex
	records map[string]Record
	version int64

	reads, writes atomic.Int64 // requests a storage service would bill
}

// Requests returns how many reads and writes the store has been asked
// for, refused ones included: what a storage service would bill.
func (m *Memory) Requests() (reads, writes int64) { return m.reads.Load(), m.writes.Load() }

// NewMemory returns an empty store whose clock is now. moved, if not nil,
// registers a function to call whenever that clock moves (a manual one);
// without it, Sleep waits on real time.
func NewMemory(now func() time.Time, moved func(wake func()) (cancel func())) *Memory {
	return &Memory{now: now, moved: moved, records: map[string]Record{}}
}

// Read implements Store.
func (m *Memory) Read(ctx context.Context, name string) (*Record, error) {
	m.reads.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(name)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrMissing, name)
	}
	r.Value = append([]byte(nil), r.Value...)
	r.Now = m.now()
	return &r, nil
}

// Write implements Store.
func (m *Memory) Write(ctx context.Context, name string, r *Record) error {
	m.writes.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(r.Value) > MaxValue {
		return fmt.Errorf("record %s: value of %d bytes, more than %d", name, len(r.Value), MaxValue)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.live(name)
	switch {
	case r.Version == "" && ok, r.Version != "" && (!ok || old.Version != r.Version):
		return fmt.Errorf("%w: %s", ErrChanged, name)
	}
	m.version++
	if m.version%sweepEvery == 0 {
		m.sweep()
	}
	now := m.now()
	w := *r
	w.Value = append([]byte(nil), r.Value...)
	w.Version = strconv.FormatInt(m.version, 10)
	w.Written, w.Now = now, now
	m.records[name] = w
	r.Version, r.Written, r.Now = w.Version, now, now
	return nil
}

// live returns the record of that name unless its life has ended (the
// store drops it then, as a sweep would). Called with m.mu held.
func (m *Memory) live(name string) (Record, bool) {
	r, ok := m.records[name]
	if ok && r.Life > 0 && !m.now().Before(r.Written.Add(r.Life)) {
		delete(m.records, name)
		return Record{}, false
	}
	return r, ok
}

// sweepEvery is how many writes go between sweeps of the records whose
// life has ended, so that a long run (a mark per scheduled message) does
// not keep them all.
const sweepEvery = 1024

// sweep drops every record whose life has ended. Called with m.mu held.
func (m *Memory) sweep() {
	for name := range m.records {
		m.live(name)
	}
}

// Now implements Store.
func (m *Memory) Now() time.Time { return m.now() }

// Known implements Store: a memory store's clock is its own, always known.
func (m *Memory) Known() bool { return true }

// Sleep implements Store: on a manual clock, it wakes at each of its moves
// to look.
func (m *Memory) Sleep(ctx context.Context, until time.Time, wake <-chan struct{}) bool {
	if m.moved == nil {
		return syncx.Sleep(ctx, until.Sub(m.now()), wake)
	}
	moved := make(chan struct{}, 1)
	cancel := m.moved(func() {
		select {
		case moved <- struct{}{}:
		default:
		}
	})
	defer cancel()
	for m.now().Before(until) {
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return ctx.Err() == nil
		case <-moved:
		}
	}
	return ctx.Err() == nil
}
