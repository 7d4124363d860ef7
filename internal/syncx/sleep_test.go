package syncx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	close(closed)
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		wake <-chan struct{}
		want bool
	}{
		// An hour's sleep ends only by its wake-up or its context: the test
		// would time out otherwise, so no timing assertion is needed.
		{"a wake-up ends it early", live, time.Hour, closed, true},
		{"an ended context ends it", ended, time.Hour, nil, false},
		{"an ended context wins over a wake-up", ended, time.Hour, closed, false},
		{"sleeps its time out", live, time.Millisecond, nil, true},
		{"no time: live", live, 0, nil, true},
		{"no time: ended", ended, -time.Second, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, Sleep(tt.ctx, tt.d, tt.wake))
		})
	}
}

func TestSleepSleepsAtLeastItsTime(t *testing.T) {
	t.Parallel()
	const d = 20 * time.Millisecond
	start := time.Now()
	assert.True(t, Sleep(context.Background(), d, make(chan struct{})))
	assert.GreaterOrEqual(t, time.Since(start), d, "a lower bound only")
}

func TestSleepEndsWhenItsContextEndsWhileSleeping(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(time.Millisecond)
		cancel()
	}()
	assert.False(t, Sleep(ctx, time.Hour, nil))
}

func TestIsClosed(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	close(closed)
	tests := []struct {
		name string
		ch   <-chan struct{}
		want bool
	}{
		{"open", make(chan struct{}), false},
		{"closed", closed, true},
		{"nil never is", nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsClosed(tt.ch), tt.name)
	}
}
