package azdispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/timetable"
)

// A change whose write's answer was lost, and which the SDK tried again
// into a failed condition, is applied again to the record as it now is: it
// finds its own write there, however the record moved on since, and
// writes nothing more.
func TestAScheduleChangeFindsItsOwnWriteAfterALostAnswer(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	runNow := runNowChange()
	st := &timetable.State{}
	write, err := runNow(st, t0)
	require.NoError(t, err)
	require.True(t, write)
	require.Equal(t, t0, st.RunNow)
	// Its answer lost for 30 s, in which a scheduler sent it: a second
	// run now would be a second occurrence.
	served := &timetable.State{LastRunNow: t0}
	write, err = runNow(served, t0.Add(30*time.Second))
	require.NoError(t, err)
	assert.False(t, write, "sent already: the same run now")
	// Not written after all (another write came first): written as asked.
	other := &timetable.State{}
	write, _ = runNow(other, t0.Add(30*time.Second))
	assert.True(t, write)
	assert.Equal(t, t0, other.RunNow, "the time it was asked")

	pause, err := pauseChange(time.Hour, &PauseOptions{By: "ops"})
	require.NoError(t, err)
	st = &timetable.State{}
	write, _ = pause(st, t0)
	require.True(t, write)
	mine := st.Pause
	// Written, then resumed by another operator before the retry: the
	// resume stands.
	resumed := &timetable.State{Pause: timetable.Pause{Since: mine.Since, Until: t0.Add(10 * time.Second), By: "ops"}}
	write, _ = pause(resumed, t0.Add(30*time.Second))
	assert.False(t, write, "its own pause found, resumed since")
	// Not written: the pause as first asked, not 30 s later.
	other = &timetable.State{}
	write, _ = pause(other, t0.Add(30*time.Second))
	assert.True(t, write)
	assert.Equal(t, mine, other.Pause)

	_, err = pauseChange(1<<63-1, nil)
	require.ErrorIs(t, err, ErrInvalidConfig, "a pause past what a time can hold is refused, not taken as one already ended")
}
