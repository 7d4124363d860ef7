package latency

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDequeuersByLittlesLaw(t *testing.T) {
	shape := Shape{Target: 5 * time.Second, PerDequeuer: 4, Batch: 32}
	// 10 a second of 2 s each keep 20 handlers busy: 5 dequeuers of 4.
	assert.Equal(t, 5, Dequeuers(Load{Rate: 10, Handler: 2 * time.Second}, shape))
	// A backlog of 50 within 5 s is 10 a second more: 40 busy, 10 dequeuers.
	assert.Equal(t, 10, Dequeuers(Load{Rate: 10, Handler: 2 * time.Second, Backlog: 50}, shape))
	// Fast handlers: the receives bound it, one dequeuer per batch waiting.
	assert.Equal(t, 4, Dequeuers(Load{Rate: 100, Handler: time.Millisecond, Backlog: 100}, shape))
	// Over the target with more waiting than the running hold: one more.
	assert.Equal(t, 7, Dequeuers(Load{Rate: 1, Handler: time.Second, Backlog: 25, Waited: 6 * time.Second, Active: 6}, shape))
	// Over the target with fewer: the wait is of a spell gone by.
	assert.Equal(t, 1, Dequeuers(Load{Rate: 1, Handler: time.Second, Backlog: 1, Waited: 6 * time.Second, Active: 6}, shape))
	// Over the target with nothing waiting: nothing to add.
	assert.Equal(t, 0, Dequeuers(Load{Waited: time.Minute, Active: 6}, shape))
	assert.Equal(t, 0, Dequeuers(Load{Rate: 10, Handler: time.Second}, Shape{}), "no target")
}

func TestRate(t *testing.T) {
	assert.Equal(t, 12.0, Rate(100, 20, 10*time.Second), "received, and the depth grew")
	assert.Equal(t, 8.0, Rate(100, -20, 10*time.Second), "received, some from what was waiting")
	assert.Equal(t, 0.0, Rate(10, -50, time.Second), "never negative")
	assert.Equal(t, 0.0, Rate(10, 0, 0))
}
