package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The checker, on handlings written by hand: a window of 10 s of a 2 s
// schedule and a 5 s one.
func TestScheduleJudgeCountsEachOccurrence(t *testing.T) {
	t.Parallel()
	specs := []scheduleSpec{{Name: "two", Every: 2 * time.Second}, {Name: "five", Every: 5 * time.Second}}
	from := time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC) // 12:00:01 to 12:00:11
	to := from.Add(10 * time.Second)
	at := func(s int) time.Time { return time.Date(2026, 3, 1, 12, 0, s, 0, time.UTC) }
	h := func(name string, s int, lateBy time.Duration) handling {
		return handling{Schedule: name, At: at(s), Received: at(s).Add(lateBy)}
	}
	catchUp := h("two", 10, 12*time.Second) // stands for 6 and 8, sent late
	catchUp.Late, catchUp.Missed = true, 2
	hs := []handling{
		h("two", 0, 0), // before the window
		h("two", 2, 100*time.Millisecond),
		h("two", 4, 2*time.Second), h("two", 4, 3*time.Second), // handled twice
		catchUp,
		// two@12:00:12 is after the window
		h("two", 12, 0),
		h("five", 5, 4*time.Second), // held up, within the bound
		// five@12:00:10 is missing
		h("five", 7, 0), // not an occurrence of its schedule
	}
	v := judgeSchedules(hs, specs, from, to, 10*time.Second, 1500*time.Millisecond)
	assert.Equal(t, 5+2, v.Expected) // two: 2, 4, 6, 8, 10; five: 5, 10
	assert.Equal(t, 4, v.Handled)    // two: 2, 4, 10; five: 5
	assert.Equal(t, 2, v.Skipped)    // two: 6, 8
	assert.Equal(t, 1, v.Missing)
	assert.Equal(t, []string{"five@12:00:10"}, v.MissingAt)
	assert.Equal(t, 1, v.Duplicated)
	assert.Equal(t, 1, v.DuplicateHandlings)
	assert.Equal(t, 1, v.Late)        // two@12:00:10, 12 s
	assert.Equal(t, 1, v.LateFlagged) // the same
	assert.Equal(t, 3, v.Delayed)     // two@4 (first handled 2 s late), two@10, five@5
	assert.Equal(t, 12*time.Second, v.MaxLate)
	assert.Equal(t, 1, v.Unexpected)
	assert.Equal(t, 2, v.HandledOutsideWindow) // two@0 and two@12
	assert.False(t, v.ok())

	v = judgeSchedules(hs[1:2], specs[:1], at(2), at(2), 10*time.Second, time.Second)
	assert.True(t, v.ok())
	assert.Equal(t, 1, v.Expected)
}
