package azdispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestIdleDelayFollowsTheRandomizedExponentialCurve(t *testing.T) {
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
			got, capped := idleDelay(tt.min, tt.max, tt.idle, tt.u, tt.v)
			assert.InDelta(t, float64(tt.want), float64(got), float64(time.Millisecond))
			assert.Equal(t, tt.wantCapped, capped)
		})
	}
}

func TestIdleDelayJitterStaysInBounds(t *testing.T) {
	for idle := 1; idle <= 12; idle++ {
		lo, _ := idleDelay(0, 30*time.Second, idle, 0, 0)
		hi, _ := idleDelay(0, 30*time.Second, idle, 0.999999, 0.999999)
		assert.LessOrEqual(t, lo, hi, "idle %d", idle)
		assert.LessOrEqual(t, hi, 30*time.Second, "idle %d", idle)
		assert.GreaterOrEqual(t, lo, time.Duration(float64(30*time.Second)*0.8)*time.Duration(boolInt(idle >= 9)), "idle %d", idle)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestExponentialIdleStopRule(t *testing.T) {
	half := func() float64 { return 0.5 }
	f := exponentialIdle(0, time.Second, half)
	tests := []struct {
		name          string
		active, floor int
		idle          int
		wantDelay     time.Duration
		wantStop      bool
	}{
		{"below the cap", 3, 1, 1, 100 * time.Millisecond, false},
		{"at the cap with others running", 3, 1, 20, 900 * time.Millisecond, true},
		{"the last dequeuer keeps polling", 1, 1, 20, 900 * time.Millisecond, false},
		{"at the floor of a larger minimum", 2, 2, 20, 900 * time.Millisecond, false},
		{"push-only: the last may stop", 1, 0, 20, 900 * time.Millisecond, true},
		{"push-only below the cap", 1, 0, 2, 300 * time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, stop := f(State{ActiveDequeuers: tt.active, MinDequeuers: tt.floor}, tt.idle)
			assert.InDelta(t, float64(tt.wantDelay), float64(d), float64(time.Millisecond))
			assert.Equal(t, tt.wantStop, stop)
		})
	}
}

func TestRetryDelayDoublesWithinJitterAndCaps(t *testing.T) {
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
		got := retryDelay(time.Second, time.Minute, tt.count, tt.u)
		assert.InDelta(t, float64(tt.want), float64(got), float64(time.Millisecond), "count %d u %v", tt.count, tt.u)
	}
}
