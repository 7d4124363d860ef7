package records_test

import (
	"context"
	"sync"
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

// A write whose answer was lost after it took effect is known for the
// writer's own when its retry is refused: the record carries its token.
func TestAWriteThatLostItsAnswerIsKnownForItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &manual{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var lose bool
	var mu sync.Mutex
	m := onMemory(c, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		mu.Lock()
		defer mu.Unlock()
		l := lose && op == blobs.OpWrite
		lose = false
		return nil, l
	})
	meta := payload.Meta{Kind: payload.KindUnique, Queue: "q", Created: c.Now(), Expires: c.Now().Add(time.Hour)}
	mu.Lock()
	lose = true
	mu.Unlock()
	_, _, err := m.Create(ctx, "key", meta, nil)
	require.Error(t, err, "the answer was lost")
	// The caller's retry is a new write with a new token: the one the
	// lost write left is another's.
	_, created, err := m.Create(ctx, "key", meta, nil)
	require.NoError(t, err)
	assert.False(t, created)

	// A write retried below the caller (as the SDK retries) keeps its
	// token: Replace recognises the write that lost its answer.
	found, err := m.Props(ctx, "key")
	require.NoError(t, err)
	replaced, err := m.Replace(ctx, "key", meta, nil, found.ETag)
	require.NoError(t, err)
	_, err = m.Replace(ctx, "key", meta, nil, found.ETag)
	assert.ErrorIs(t, err, records.ErrChanged, "a stale version is refused")
	got, err := m.Props(ctx, "key")
	require.NoError(t, err)
	assert.Equal(t, replaced.ETag, got.ETag)
}
