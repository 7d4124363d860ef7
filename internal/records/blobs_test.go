package records_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/records/recordstest"
)

// manual is a clock that moves when told to.
type manual struct {
	mu    sync.Mutex
	now   time.Time
	wakes []func()
}

func (c *manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manual) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	wakes := append([]func(){}, c.wakes...)
	c.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}

func (c *manual) subscribe(wake func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wakes = append(c.wakes, wake)
	return func() {}
}

func onMemory(c *manual, hook blobs.Hook) *records.Blobs {
	return records.OnBlobs(blobs.NewMemory("records", c.Now, hook), records.NewClock(c.Now, nil, c.subscribe), nil)
}

func TestConformanceRecordsMemory(t *testing.T) {
	t.Parallel()
	recordstest.Run(t, func(t *testing.T) records.Store {
		return onMemory(&manual{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, nil)
	})
}

func TestSleepFollowsAManualClock(t *testing.T) {
	t.Parallel()
	c := &manual{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := onMemory(c, nil)
	done := make(chan bool)
	until := c.Now().Add(time.Hour)
	go func() { done <- m.Sleep(context.Background(), until, nil) }()
	c.advance(30 * time.Minute)
	select {
	case <-done:
		t.Fatal("woke before its time")
	case <-time.After(20 * time.Millisecond):
	}
	c.advance(30 * time.Minute)
	assert.True(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, m.Sleep(ctx, c.Now().Add(time.Hour), nil))
	wake := make(chan struct{})
	close(wake)
	assert.True(t, m.Sleep(context.Background(), c.Now().Add(time.Hour), wake))
}

// retrying retries a write whose answer was lost, once, with the same
// request, as the SDK's pipeline does.
type retrying struct{ blobs.Backend }

func (r retrying) Create(ctx context.Context, name string, w blobs.Write) (blobs.Info, error) {
	info, err := r.Backend.Create(ctx, name, w)
	if errors.Is(err, context.DeadlineExceeded) {
		return r.Backend.Create(ctx, name, w)
	}
	return info, err
}

func (r retrying) Replace(ctx context.Context, name string, w blobs.Write, etag string) (blobs.Info, error) {
	info, err := r.Backend.Replace(ctx, name, w, etag)
	if errors.Is(err, context.DeadlineExceeded) {
		return r.Backend.Replace(ctx, name, w, etag)
	}
	return info, err
}

// A write that took effect but lost its answer, retried below the caller
// into a conflict with itself, is known for the writer's own: the record
// carries its token. Another writer's record is not.
func TestAWriteThatLostItsAnswerIsKnownForItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &manual{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var lose atomic.Int32
	mem := blobs.NewMemory("records", c.Now, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		return nil, op == blobs.OpWrite && lose.Add(-1) >= 0
	})
	m := records.OnBlobs(retrying{mem}, records.NewClock(c.Now, nil, nil), nil)
	meta := payload.Meta{Kind: payload.KindUnique, Queue: "q", Created: c.Now(), Expires: c.Now().Add(time.Hour)}

	lose.Store(1)
	first, created, err := m.Create(ctx, "key", meta, nil)
	require.NoError(t, err)
	assert.True(t, created, "its own, though its retry was refused")
	_, created, err = m.Create(ctx, "key", meta, nil)
	require.NoError(t, err)
	assert.False(t, created, "another writer's")

	lose.Store(1)
	replaced, err := m.Replace(ctx, "key", meta, nil, first.ETag)
	require.NoError(t, err, "its own, though its retry was refused")
	assert.NotEqual(t, first.ETag, replaced.ETag)
	_, err = m.Replace(ctx, "key", meta, nil, first.ETag)
	assert.ErrorIs(t, err, records.ErrChanged, "a stale version is refused")

	r := &records.Record{Kind: payload.KindSchedule, Value: []byte("1")}
	lose.Store(1)
	require.NoError(t, m.Write(ctx, "state", r), "a scheduler's create whose answer was lost")
	got, err := m.Read(ctx, "state")
	require.NoError(t, err)
	assert.Equal(t, r.Version, got.Version)
}
