package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestIdleFollowsTheRandomizedExponentialCurve(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	tests := []struct {
		name       string
		min, max   time.Duration
		idle       int
		u, v       float64
		want       time.Duration
		wantCapped bool
	}{
		{"first empty, low jitter", 0, 30 * time.Second, 1, 0, 0, 80 * ms, false},
		{"first empty, mid jitter", 0, 30 * time.Second, 1, 0.5, 0, 100 * ms, false},
		{"first empty, min added", 50 * ms, 30 * time.Second, 1, 0.5, 0, 150 * ms, false},
		{"third empty", 0, 30 * time.Second, 3, 0.5, 0, 700 * ms, false},
		{"eighth empty", 0, 30 * time.Second, 8, 0.5, 0, 25500 * ms, false},
		{"ninth empty reaches the cap, jitter kept", 0, 30 * time.Second, 9, 0.5, 0, 24 * time.Second, true},
		{"cap, top of the jitter", 0, 30 * time.Second, 9, 0.5, 0.999999, 30 * time.Second, true},
		{"huge idle count does not overflow", 0, time.Minute, 1 << 20, 0.5, 0.5, 54 * time.Second, true},
		{"zero idle count is the minimum", 20 * ms, time.Second, 0, 0.5, 0.5, 20 * ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, capped := Idle(tt.min, tt.max, tt.idle, tt.u, tt.v)
			assert.InDelta(t, float64(tt.want), float64(got), float64(time.Millisecond))
			assert.Equal(t, tt.wantCapped, capped)
		})
	}
}

func TestIdleJitterStaysInBounds(t *testing.T) {
	t.Parallel()
	const maxIdle = 30 * time.Second
	for idle := 1; idle <= 12; idle++ {
		lo, _ := Idle(0, maxIdle, idle, 0, 0)
		hi, _ := Idle(0, maxIdle, idle, 0.999999, 0.999999)
		assert.LessOrEqual(t, lo, hi, "idle %d", idle)
		assert.LessOrEqual(t, hi, maxIdle, "idle %d", idle)
		if idle >= 9 { // at the cap, the jitter stays in its top fifth
			assert.GreaterOrEqual(t, lo, time.Duration(float64(maxIdle)*0.8), "idle %d", idle)
		}
	}
}

func TestRetryDoublesWithinJitterAndCaps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		count int64
		u     float64
		want  time.Duration
	}{
		{0, 0.5, time.Second},
		{1, 0.5, time.Second},
		{2, 0.5, 2 * time.Second},
		{4, 0.5, 8 * time.Second},
		{4, 0, 6400 * time.Millisecond},
		{4, 0.999999, 9600 * time.Millisecond},
		{20, 0.5, time.Minute},
		{20, 0.999999, time.Minute}, // jitter never exceeds the cap
		{1 << 40, 0.5, time.Minute},
	}
	for _, tt := range tests {
		got := Retry(time.Second, time.Minute, tt.count, tt.u)
		assert.InDelta(t, float64(tt.want), float64(got), float64(time.Millisecond), "count %d u %v", tt.count, tt.u)
	}
}
