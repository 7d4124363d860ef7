package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
)

func TestOverdue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		s    azdispatch.ScheduleState
		want time.Duration
	}{
		{"in the future", azdispatch.ScheduleState{Next: now.Add(time.Hour)}, 0},
		{"now", azdispatch.ScheduleState{Next: now}, 0},
		{"within the grace", azdispatch.ScheduleState{Next: now.Add(-overdueGrace)}, 0},
		{"past the grace", azdispatch.ScheduleState{Next: now.Add(-overdueGrace - time.Second)}, overdueGrace + time.Second},
		{"long past", azdispatch.ScheduleState{Next: now.Add(-3*time.Hour - 500*time.Millisecond)}, 3 * time.Hour},
		{"ended", azdispatch.ScheduleState{Next: now.Add(-3 * time.Hour), Ended: true}, 0},
		{"no next time", azdispatch.ScheduleState{}, 0},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, overdue(c.s, now), c.name)
	}
}
