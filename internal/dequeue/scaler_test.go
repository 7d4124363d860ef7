package dequeue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestScalerReadsDepthAtMostOncePerInterval(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := Scaler{Interval: 10 * time.Second, Min: 1, Max: 8}
	steps := []struct {
		at   time.Duration
		done bool // finish the read claimed before this step
		want bool
	}{
		{0, false, true},
		{time.Second, false, false},      // a read is under way
		{2 * time.Second, true, false},   // done, but within the interval
		{10 * time.Second, false, true},  // the interval has passed
		{25 * time.Second, false, false}, // still reading: one at a time
		{26 * time.Second, true, true},   // done, and long enough ago
		{26*time.Second + time.Millisecond, true, false},
	}
	for i, st := range steps {
		if st.done {
			s.ReadDone()
		}
		assert.Equal(t, st.want, s.ClaimDepthRead(t0.Add(st.at)), "step %d at %v", i, st.at)
	}
}

func TestScalerTargetClampsAndOnlyGrows(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	tests := []struct {
		name              string
		min, max          int
		want, active, add int
	}{
		{"grows to the target", 1, 8, 4, 1, 3},
		{"capped at the maximum", 1, 8, 63, 2, 6},
		{"never shrinks", 1, 8, 1, 5, 0},
		{"already there", 1, 8, 5, 5, 0},
		{"at least the minimum", 3, 8, 0, 1, 2},
		{"push-only still starts one", 0, 8, 0, 0, 1},
		{"at the maximum", 1, 4, 10, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Scaler{Interval: time.Second, Min: tt.min, Max: tt.max}
			assert.Equal(t, tt.add, s.Target(t0, tt.want, tt.active))
			assert.Equal(t, tt.add == 0, s.MayRetire(t0), "a scale-up holds retirements")
		})
	}
}

func TestScalerHoldsRetirementsAfterAScaleUp(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := Scaler{Interval: 10 * time.Second, Min: 1, Max: 8}
	assert.True(t, s.MayRetire(t0), "never scaled: idle dequeuers may stop")
	assert.Equal(t, 3, s.Target(t0, 4, 1))
	for _, tt := range []struct {
		after time.Duration
		want  bool
	}{
		{0, false},
		{time.Second, false}, // no scale-down in the next second
		{9 * time.Second, false},
		{10 * time.Second, true},
		{time.Minute, true},
	} {
		assert.Equal(t, tt.want, s.MayRetire(t0.Add(tt.after)), "%v after the scale-up", tt.after)
	}
}

// Between depth readings, a round of full receives (as many as dequeuers
// run) adds a dequeuer, up to the maximum; a reading starts the count
// again.
func TestScalerGrowsOnARoundOfFullReceives(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := Scaler{Interval: 10 * time.Second, Min: 1, Max: 3}
	assert.True(t, s.ClaimDepthRead(t0))
	s.ReadDone()
	assert.True(t, s.Full(t0, 1), "one dequeuer, one full receive: one more")
	assert.False(t, s.MayRetire(t0), "a scale-up on full receives holds retirements too")
	assert.False(t, s.Full(t0, 2), "two dequeuers: one full receive is half a round")
	assert.True(t, s.Full(t0, 2))
	assert.False(t, s.Full(t0, 3), "at the maximum")
	assert.False(t, s.Full(t0, 3))
	assert.False(t, s.Full(t0, 3))

	s = Scaler{Interval: 10 * time.Second, Min: 1, Max: 8}
	assert.False(t, s.Full(t0, 2))
	assert.True(t, s.ClaimDepthRead(t0), "a reading")
	s.ReadDone()
	assert.False(t, s.Full(t0, 2), "counts from the reading")
	assert.True(t, s.Full(t0, 2))
}
