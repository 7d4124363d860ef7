package azdispatch_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// handledSorted returns the occurrences handled so far, by time, without
// their schedule's name.
func (r *schedRig) handledSorted() []azdispatch.Occurrence {
	r.mu.Lock()
	defer r.mu.Unlock()
	occ := slices.Clone(r.handled)
	for i := range occ {
		occ[i].Schedule = ""
	}
	// Handlers run concurrently: in any order.
	slices.SortFunc(occ, func(a, b azdispatch.Occurrence) int { return a.At.Compare(b.At) })
	return occ
}

// idleScheduler is a scheduler that knows the schedules but does not run
// them: another process's, through which an operator acts.
func (r *schedRig) idleScheduler(schedules ...azdispatch.Schedule[string]) *azdispatch.Scheduler[string] {
	r.t.Helper()
	s, err := azdispatch.NewScheduler(r.pub, &azdispatch.SchedulerOptions{Instance: "operator", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(r.t, err)
	for _, sc := range schedules {
		require.NoError(r.t, s.Add(sc))
	}
	return s
}

func TestOccurrencesInAPauseAreSentByTheMisfirePolicyWhenItEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range missedTenByPolicy {
		r := newSchedRig(t, schedStart.Add(30*time.Second))
		sched := azdispatch.Schedule[string]{Name: "report", Every: time.Minute, Messages: echo, Misfire: tc.policy, CatchUp: 3}
		s := r.scheduler("a", sched)
		r.settle(s, "report")
		st, err := s.Pause(r.ctx, "report", 10*time.Minute, &azdispatch.PauseOptions{By: "ops: the mail relay is down"})
		require.NoError(t, err)
		assert.Equal(t, azdispatch.PauseState{Since: schedStart.Add(30 * time.Second), Until: schedStart.Add(10*time.Minute + 31*time.Second), By: "ops: the mail relay is down"}, st.Paused,
			"at least 10 minutes, from a time on the store's clock that may be a second behind")

		// The scheduler runs all along, and wakes at every minute's move
		// of the clock: the pause, not an absence, holds 12:01 to 12:10.
		for range 10 {
			r.clock.Advance(time.Minute)
		}
		r.clock.Advance(35 * time.Second) // 12:11:05
		st = r.settle(s, "report")

		assert.Equal(t, tc.want, r.handledSorted(), "policy %d", tc.policy)
		assert.Equal(t, schedStart.Add(12*time.Minute), st.Next)
		assert.EqualValues(t, 11-len(tc.want), st.Skipped)
		assert.Zero(t, st.Paused, "the pause is over and its occurrences decided")
	}
}

func TestAPauseShorterThanTheGraceStillMissesItsOccurrences(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(500*time.Millisecond))
	s := r.scheduler("a", azdispatch.Schedule[string]{Name: "tick", Every: 2 * time.Second, Messages: echo, Misfire: azdispatch.MisfireSkip})
	r.settle(s, "tick")
	st, err := s.Pause(r.ctx, "tick", 9*time.Second, nil) // the grace is 30 s
	require.NoError(t, err)
	require.Equal(t, schedStart.Add(11*time.Second), st.Paused.Until, "at least 9 s from 12:00:00.5, to the second, and a second more")
	r.clock.Advance(12 * time.Second)
	st = r.settle(s, "tick")
	assert.Equal(t, []azdispatch.Occurrence{{At: schedStart.Add(12 * time.Second)}}, r.handledSorted(),
		"12:00:02 to 12:00:10 fell in the pause: skipped, though within the grace; 12:00:12 is after it")
	assert.EqualValues(t, 5, st.Skipped)
	assert.Equal(t, schedStart.Add(14*time.Second), st.Next)
}

func TestAResumeEndsThePauseAtOnceAndElsewhereWithinTheWatch(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(30*time.Second))
	sched := azdispatch.Schedule[string]{Name: "report", Every: time.Minute, Messages: echo}
	s := r.scheduler("a", sched)
	r.settle(s, "report")
	_, err := s.Pause(r.ctx, "report", time.Hour, nil)
	require.NoError(t, err)
	r.clock.Advance(4*time.Minute + 40*time.Second) // 12:05:10
	st, err := s.Resume(r.ctx, "report")
	require.NoError(t, err)
	assert.Equal(t, schedStart.Add(5*time.Minute+10*time.Second), st.Paused.Until, "ended now")
	st = r.settle(s, "report")
	assert.Equal(t, []azdispatch.Occurrence{{At: schedStart.Add(5 * time.Minute), Late: true, Missed: 4}}, r.handledSorted(),
		"12:01 to 12:05 fell in the pause: one catch-up, the default policy")
	assert.Equal(t, schedStart.Add(6*time.Minute), st.Next)

	// Paused and resumed by another process: this one finds out at its
	// next look, within the watch (30 s), not at the next occurrence.
	operator := r.idleScheduler(sched)
	_, err = operator.Pause(r.ctx, "report", time.Hour, nil)
	require.NoError(t, err)
	r.clock.Advance(2 * time.Minute) // 12:07:10: 12:06 and 12:07 held
	_, err = operator.Resume(r.ctx, "report")
	require.NoError(t, err)
	r.clock.Advance(30 * time.Second)
	st = r.settle(s, "report")
	assert.Equal(t, azdispatch.Occurrence{At: schedStart.Add(7 * time.Minute), Late: true, Missed: 1}, r.handledSorted()[1])
	assert.Equal(t, schedStart.Add(8*time.Minute), st.Next)

	// A resume of a schedule not paused changes nothing.
	before := st
	st, err = operator.Resume(r.ctx, "report")
	require.NoError(t, err)
	assert.Equal(t, before, st)
}

func TestRunNowSendsOneOccurrenceBesidesTheTimetable(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(30*time.Second))
	sched := azdispatch.Schedule[string]{Name: "hourly", Every: time.Hour, Messages: echo}
	s := r.scheduler("a", sched)
	r.settle(s, "hourly")
	asked := schedStart.Add(30 * time.Second)

	st, err := s.RunNow(r.ctx, "hourly")
	require.NoError(t, err)
	assert.Equal(t, asked, st.RunNow)
	st = r.settle(s, "hourly")
	assert.Equal(t, []azdispatch.Occurrence{{At: asked, RunNow: true}}, r.handledSorted())
	assert.Zero(t, st.RunNow)
	assert.Equal(t, asked, st.LastRunNow)
	assert.Equal(t, schedStart.Add(time.Hour), st.Next, "the timetable goes on as it was")

	// Asked again within ten seconds (a second operator, a second
	// click): the same run.
	r.clock.Advance(5 * time.Second)
	st, err = s.RunNow(r.ctx, "hourly")
	require.NoError(t, err)
	assert.Zero(t, st.RunNow)
	assert.Equal(t, asked, st.LastRunNow)

	// Later: another, paused or not, and asked by another process too.
	r.clock.Advance(10 * time.Second)
	_, err = s.Pause(r.ctx, "hourly", 2*time.Hour, nil)
	require.NoError(t, err)
	_, err = s.RunNow(r.ctx, "hourly")
	require.NoError(t, err)
	r.settle(s, "hourly")
	r.clock.Advance(20 * time.Second)
	_, err = r.idleScheduler(sched).RunNow(r.ctx, "hourly")
	require.NoError(t, err)
	r.clock.Advance(30 * time.Second) // the watch
	st = r.settle(s, "hourly")
	assert.Equal(t, []azdispatch.Occurrence{
		{At: asked, RunNow: true},
		{At: asked.Add(15 * time.Second), RunNow: true},
		{At: asked.Add(35 * time.Second), RunNow: true},
	}, r.handledSorted())
	assert.EqualValues(t, 3, st.Sent)
	assert.True(t, st.Paused.Active(r.clock.Now()))

	r.mu.Lock()
	assert.Equal(t, "hourly@12:00:30", r.bodies[0], "Messages sees the run-now's time")
	r.mu.Unlock()
}

func TestScheduleControlsRefuseWhatTheyCannotDo(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart)
	three := func(after time.Time) time.Time {
		if next := after.Truncate(time.Minute).Add(time.Minute); next.Before(schedStart.Add(2 * time.Minute)) {
			return next
		}
		return time.Time{}
	}
	s := r.scheduler("a", azdispatch.Schedule[string]{Name: "once", Next: three, Messages: echo})
	r.settle(s, "once")
	r.advance(s, "once", 2*time.Minute, 30*time.Second)
	require.True(t, r.settle(s, "once").Ended)

	_, err := s.RunNow(r.ctx, "once")
	require.ErrorIs(t, err, azdispatch.ErrScheduleEnded)
	_, err = s.RunNow(r.ctx, "nonesuch")
	require.ErrorIs(t, err, azdispatch.ErrScheduleNotFound)
	assert.Contains(t, err.Error(), `"nonesuch"`)
	_, err = s.Pause(r.ctx, "nonesuch", time.Minute, nil)
	require.ErrorIs(t, err, azdispatch.ErrScheduleNotFound)
	_, err = s.Pause(r.ctx, "once", 0, nil)
	require.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	_, err = s.Pause(r.ctx, "once", time.Minute, &azdispatch.PauseOptions{By: strings.Repeat("x", 257)})
	require.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	assert.Equal(t, 1, strings.Count(err.Error(), "azdispatch:"), err.Error())
}

// The controls need only the store: an operator's process with no
// Scheduler acts through the payload store.
func TestAPayloadStoreControlsASchedule(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(30*time.Second))
	s := r.scheduler("a", azdispatch.Schedule[string]{Name: "hourly", Every: time.Hour, Messages: echo})
	r.settle(s, "hourly")
	store := r.q.PayloadStore()
	st, err := store.PauseSchedule(context.Background(), "jobs", "hourly", time.Minute, &azdispatch.PauseOptions{By: "me"})
	require.NoError(t, err)
	assert.Equal(t, "me", st.Paused.By)
	states, err := store.Schedules(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	assert.Equal(t, st.Paused, states[0].Paused)
	st, err = store.RunScheduleNow(context.Background(), "jobs", "hourly")
	require.NoError(t, err)
	assert.False(t, st.RunNow.IsZero())
	st, err = store.ResumeSchedule(context.Background(), "jobs", "hourly")
	require.NoError(t, err)
	assert.False(t, st.Paused.Active(r.clock.Now()))
	r.clock.Advance(30 * time.Second)
	r.settle(s, "hourly")
	assert.Len(t, r.handledSorted(), 1)
}
