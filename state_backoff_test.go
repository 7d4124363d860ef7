package azdispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The curve itself is tested in internal/backoff; here, what the listener
// is told: wait along the curve, and stop once it has reached the cap.
func TestExponentialIdleSaysStopOnlyAtTheCap(t *testing.T) {
	t.Parallel()
	half := func() float64 { return 0.5 }
	f := exponentialIdle(0, time.Second, half)
	tests := []struct {
		idle      int
		wantDelay time.Duration
		wantStop  bool
	}{
		{1, 100 * time.Millisecond, false},
		{2, 300 * time.Millisecond, false},
		{20, 900 * time.Millisecond, true},
	}
	for _, tt := range tests {
		d, stop := f(State{ActiveDequeuers: 3}, tt.idle)
		assert.InDelta(t, float64(tt.wantDelay), float64(d), float64(time.Millisecond), "idle count %d", tt.idle)
		assert.Equal(t, tt.wantStop, stop, "idle count %d", tt.idle)
	}
}

func TestExponentialRetryStaysWithinItsBounds(t *testing.T) {
	t.Parallel()
	f := ExponentialRetry(time.Second, time.Minute)
	for n := int64(1); n < 40; n++ {
		d := f(n)
		assert.GreaterOrEqual(t, d, 800*time.Millisecond, "dequeue count %d", n)
		assert.LessOrEqual(t, d, time.Minute, "dequeue count %d", n)
	}
}
