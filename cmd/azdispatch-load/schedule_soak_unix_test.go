//go:build unix

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// Forty seconds of the schedule soak, end to end: three scheduler
// processes (this test binary again, see TestMain) killed and paused, one
// listener. Only the verdict is asserted, and that faults were made, not
// how late anything was: the bound is seconds wide, and the machine is
// shared. The seed is logged, so a failure can be replayed with -seed.
// Unix only: the scenario pauses processes with SIGSTOP.
func TestScheduleShortRunHandlesEachOccurrenceOnce(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	t.Parallel()
	cfg := scheduleQuick(40 * time.Second)
	rec := runSoak[scheduleRecord](t, runSchedule, options{schedule: &cfg})
	assert.Equal(t, "schedule", rec.Scenario)
	assert.Zero(t, rec.Missing, "missing")
	assert.Zero(t, rec.Duplicated, "duplicated")
	assert.True(t, rec.OK)
	assert.Positive(t, rec.Occurrences)
	assert.Equal(t, rec.Occurrences, rec.Handled+rec.Skipped)
	assert.Positive(t, rec.Kills, "kills")
	assert.Positive(t, rec.Pauses, "pauses")
	assert.Positive(t, rec.RequestsPerOccurrence)
}
