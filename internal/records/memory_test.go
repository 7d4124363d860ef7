package records

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a manual clock for the store.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	wakes []func()
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	wakes := append([]func(){}, c.wakes...)
	c.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}

func (c *clock) subscribe(wake func()) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wakes = append(c.wakes, wake)
	return func() {}
}

func TestWritesAreConditional(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := NewMemory(c.Now, c.subscribe)
	_, err := m.Read(ctx, "a")
	require.ErrorIs(t, err, ErrMissing)

	first := &Record{Kind: "k", Value: []byte("1")}
	require.NoError(t, m.Write(ctx, "a", first))
	assert.NotEmpty(t, first.Version)
	assert.ErrorIs(t, m.Write(ctx, "a", &Record{Kind: "k", Value: []byte("2")}), ErrChanged, "a create finds it")

	read, err := m.Read(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []byte("1"), read.Value)
	read.Value = []byte("3")
	require.NoError(t, m.Write(ctx, "a", read))
	first.Value = []byte("4")
	assert.ErrorIs(t, m.Write(ctx, "a", first), ErrChanged, "an old version is refused")
	assert.ErrorIs(t, m.Write(ctx, "b", &Record{Version: "1"}), ErrChanged, "a replace of nothing is refused")
	assert.Error(t, m.Write(ctx, "c", &Record{Value: make([]byte, MaxValue+1)}))
}

func TestARecordLivesItsLife(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := NewMemory(c.Now, c.subscribe)
	require.NoError(t, m.Write(ctx, "a", &Record{Life: time.Hour}))
	c.advance(59 * time.Minute)
	_, err := m.Read(ctx, "a")
	require.NoError(t, err)
	c.advance(time.Minute)
	_, err = m.Read(ctx, "a")
	assert.ErrorIs(t, err, ErrMissing)
	assert.NoError(t, m.Write(ctx, "a", &Record{}), "created anew once gone")
}

func TestSleepFollowsAManualClock(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := NewMemory(c.Now, c.subscribe)
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

func TestRecordsWhoseLifeEndedAreSweptAsWritesGoOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := NewMemory(c.Now, c.subscribe)
	for i := range sweepEvery {
		require.NoError(t, m.Write(ctx, fmt.Sprint("old", i), &Record{Life: time.Minute}))
	}
	c.advance(time.Hour)
	for i := range sweepEvery {
		require.NoError(t, m.Write(ctx, fmt.Sprint("new", i), &Record{Life: 2 * time.Hour}))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Len(t, m.records, sweepEvery, "only the live ones kept")
}
