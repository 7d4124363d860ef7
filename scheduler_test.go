package azdispatch_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// schedRig is a queue on a manual clock, schedulers sending to it, and a
// listener recording every occurrence it handles.
type schedRig struct {
	t     *testing.T
	ctx   context.Context
	clock *memqueue.ManualClock
	q     *memqueue.Queue
	pub   *azdispatch.Publisher[string]
	l     *azdispatch.Listener[string]

	mu      sync.Mutex
	handled []azdispatch.Occurrence
	bodies  []string
	wg      sync.WaitGroup
	jitter  time.Duration // the schedules'
}

var schedStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newSchedRig(t *testing.T, start time.Time) *schedRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &schedRig{t: t, ctx: ctx, clock: memqueue.NewManualClock(start)}
	r.q = memqueue.New("jobs", &memqueue.Options{Clock: r.clock})
	var err error
	r.pub, err = azdispatch.NewPublisher[string](r.q, nil)
	require.NoError(t, err)
	r.l, err = azdispatch.NewListener(r.q, func(_ context.Context, m *azdispatch.Message[string]) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.Occurrence != nil {
			r.handled = append(r.handled, *m.Occurrence)
		}
		r.bodies = append(r.bodies, m.Body)
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 10*time.Millisecond)}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	r.wg.Go(func() { assert.NoError(t, r.l.Run(ctx)) })
	t.Cleanup(func() {
		cancel()
		r.wg.Wait()
	})
	return r
}

// scheduler starts a scheduler named instance with schedules.
func (r *schedRig) scheduler(instance string, schedules ...azdispatch.Schedule[string]) *azdispatch.Scheduler[string] {
	r.t.Helper()
	s, err := azdispatch.NewScheduler(r.pub, &azdispatch.SchedulerOptions{Instance: instance, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(r.t, err)
	for _, sc := range schedules {
		require.NoError(r.t, s.Add(sc))
	}
	r.wg.Go(func() { assert.NoError(r.t, s.Run(r.ctx)) })
	return s
}

// occurrences returns the times of the occurrences handled so far.
func (r *schedRig) occurrences() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ts []time.Time
	for _, o := range r.handled {
		ts = append(ts, o.At)
	}
	slices.SortFunc(ts, time.Time.Compare) // handlers run concurrently: in any order
	return ts
}

// settle waits until the schedule's state says its next occurrence is
// after the clock, or it ended, no run-now waits, and every message sent
// was handled.
func (r *schedRig) settle(s *azdispatch.Scheduler[string], name string) azdispatch.ScheduleState {
	r.t.Helper()
	var st azdispatch.ScheduleState
	require.Eventually(r.t, func() bool {
		states, err := s.States(r.ctx)
		if err != nil {
			return false
		}
		for _, x := range states {
			st = x
			// Not yet due, with its jitter (up to r.jitter), claimed, or
			// asked to run now.
			if x.Name == name && x.ClaimedBy == "" && x.RunNow.IsZero() && (x.Ended || x.Next.Add(r.jitter).After(r.clock.Now())) {
				st = x
				depth, err := r.q.Depth(r.ctx)
				return err == nil && depth == 0 && r.l.State().InFlight == 0
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "at %v: %+v, in flight %d", r.clock.Now(), st, r.l.State().InFlight)
	return st
}

func (r *schedRig) advance(s *azdispatch.Scheduler[string], name string, d, step time.Duration) {
	r.t.Helper()
	for end := r.clock.Now().Add(d); r.clock.Now().Before(end); {
		r.clock.Advance(step)
		r.settle(s, name)
	}
}

func echo(_ context.Context, o azdispatch.Occurrence) ([]string, error) {
	return []string{o.Schedule + "@" + o.At.Format(time.TimeOnly)}, nil
}

func TestAnIntervalScheduleSendsEachOccurrenceOnceWithItsTime(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(500*time.Millisecond))
	s := r.scheduler("a", azdispatch.Schedule[string]{Name: "tick", Every: 10 * time.Second, Messages: echo})
	st := r.settle(s, "tick")
	assert.Equal(t, schedStart.Add(10*time.Second), st.Next)
	r.advance(s, "tick", 35*time.Second, time.Second)

	want := []time.Time{schedStart.Add(10 * time.Second), schedStart.Add(20 * time.Second), schedStart.Add(30 * time.Second)}
	assert.Equal(t, want, r.occurrences())
	st = r.settle(s, "tick")
	assert.Equal(t, schedStart.Add(30*time.Second), st.Last)
	assert.Equal(t, "a", st.LastBy)
	assert.EqualValues(t, 3, st.Sent)
	assert.False(t, st.LastLate)
	assert.Equal(t, "every 10s", st.Spec)
	r.mu.Lock()
	assert.Equal(t, "tick@12:00:10", r.bodies[0])
	r.mu.Unlock()
}

// schedulerUntil is scheduler, stopped by stop.
func (r *schedRig) schedulerUntil(instance string, schedules ...azdispatch.Schedule[string]) (s *azdispatch.Scheduler[string], stop func()) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	s, err := azdispatch.NewScheduler(r.pub, &azdispatch.SchedulerOptions{Instance: instance, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(r.t, err)
	for _, sc := range schedules {
		require.NoError(r.t, s.Add(sc))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(r.t, s.Run(ctx))
	}()
	return s, func() {
		cancel()
		<-done
	}
}

// policyCase is what a schedule every minute with CatchUp 3, whose
// occurrences 12:01 to 12:10 were missed, sends by a policy at 12:11:05.
type policyCase struct {
	policy azdispatch.Misfire
	want   []azdispatch.Occurrence
}

var missedTenByPolicy = []policyCase{
	{azdispatch.MisfireOne, []azdispatch.Occurrence{
		{At: schedStart.Add(10 * time.Minute), Late: true, Missed: 9},
		{At: schedStart.Add(11 * time.Minute)},
	}},
	{azdispatch.MisfireSkip, []azdispatch.Occurrence{{At: schedStart.Add(11 * time.Minute)}}},
	{azdispatch.MisfireEach, []azdispatch.Occurrence{
		{At: schedStart.Add(8 * time.Minute), Late: true, Missed: 7},
		{At: schedStart.Add(9 * time.Minute), Late: true},
		{At: schedStart.Add(10 * time.Minute), Late: true},
		{At: schedStart.Add(11 * time.Minute)},
	}},
}

func TestMissedOccurrencesAreSentByTheSchedulesPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range missedTenByPolicy {
		r := newSchedRig(t, schedStart.Add(30*time.Second))
		sched := azdispatch.Schedule[string]{Name: "report", Every: time.Minute, Messages: echo, Misfire: tc.policy, CatchUp: 3}
		first, stop := r.schedulerUntil("a", sched)
		r.settle(first, "report")
		stop()
		// No scheduler runs from 12:00:30 to 12:11:05: 12:01 to 12:10 are
		// missed (more than the 30 s grace late), 12:11 is on time.
		r.clock.Advance(10*time.Minute + 35*time.Second)
		second := r.scheduler("b", sched)
		st := r.settle(second, "report")

		r.mu.Lock()
		for i := range r.handled {
			r.handled[i].Schedule = ""
		}
		// Handlers run concurrently: in any order.
		slices.SortFunc(r.handled, func(a, b azdispatch.Occurrence) int { return a.At.Compare(b.At) })
		assert.Equal(t, tc.want, r.handled, "policy %d", tc.policy)
		r.mu.Unlock()
		assert.Equal(t, schedStart.Add(12*time.Minute), st.Next)
		assert.EqualValues(t, 11-len(tc.want), st.Skipped)
		assert.EqualValues(t, len(tc.want), st.Sent)
		assert.Equal(t, "b", st.LastBy)
	}
}

func TestACronScheduleInATimeZoneKeepsItsWallClockAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	// Spring: 2026-03-29 02:00 → 03:00. A daily 02:30 does not run that day.
	r := newSchedRig(t, time.Date(2026, 3, 27, 12, 0, 0, 0, berlin))
	daily := azdispatch.Schedule[string]{Name: "daily", Cron: "30 2 * * *", Location: berlin, Messages: echo}
	s := r.scheduler("a", daily)
	r.settle(s, "daily")
	r.advance(s, "daily", 4*24*time.Hour, time.Hour)
	var got []string
	for _, at := range r.occurrences() {
		got = append(got, at.In(berlin).Format("01-02 15:04 MST"))
	}
	assert.Equal(t, []string{"03-28 02:30 CET", "03-30 02:30 CEST", "03-31 02:30 CEST"}, got)

	// Autumn: 2026-10-25 03:00 → 02:00. An hourly one runs 24 times that
	// day: the repeated 02:00 once, at its first instant.
	r = newSchedRig(t, time.Date(2026, 10, 24, 23, 30, 0, 0, berlin))
	hourly := azdispatch.Schedule[string]{Name: "hourly", Cron: "0 * * * *", Location: berlin, Messages: echo}
	s = r.scheduler("a", hourly)
	r.settle(s, "hourly")
	r.advance(s, "hourly", 25*time.Hour, 30*time.Minute)
	occ := r.occurrences()
	slices.SortFunc(occ, time.Time.Compare)
	var day []string
	for _, at := range occ {
		if at.In(berlin).Day() == 25 {
			day = append(day, at.In(berlin).Format("15:04 MST"))
		}
	}
	require.Len(t, day, 24)
	assert.Equal(t, []string{"00:00 CEST", "01:00 CEST", "02:00 CEST", "03:00 CET"}, day[:4])
	assert.Equal(t, "23:00 CET", day[23])
}

func TestATimetableThatReturnsZeroEndsTheSchedule(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart)
	three := func(after time.Time) time.Time {
		if next := after.Truncate(time.Minute).Add(time.Minute); next.Before(schedStart.Add(4 * time.Minute)) {
			return next
		}
		return time.Time{}
	}
	s := r.scheduler("a", azdispatch.Schedule[string]{Name: "three", Next: three, Messages: echo})
	r.settle(s, "three")
	r.advance(s, "three", 10*time.Minute, 30*time.Second)
	assert.Len(t, r.occurrences(), 3)
	st := r.settle(s, "three")
	assert.True(t, st.Ended)
	assert.True(t, st.Next.IsZero())
	assert.Equal(t, "func", st.Spec)
}

func TestSchedulesAddedAndRemovedWhileRunning(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(time.Second))
	a := azdispatch.Schedule[string]{Name: "a", Every: 10 * time.Second, Messages: echo}
	b := azdispatch.Schedule[string]{Name: "b", Every: 10 * time.Second, Messages: echo}
	s := r.scheduler("x", a)
	r.settle(s, "a")
	r.advance(s, "a", 20*time.Second, 5*time.Second)
	require.NoError(t, s.Add(b))
	r.advance(s, "b", 20*time.Second, 5*time.Second)
	// a ran beside b all the while: let it finish what is due before it
	// goes (advance waited on b alone, and a loaded machine may lag).
	r.settle(s, "a")
	assert.True(t, s.Remove("a"))
	assert.False(t, s.Remove("a"))
	r.advance(s, "b", 20*time.Second, 5*time.Second)

	count := func() map[string]int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := map[string]int{}
		for _, o := range r.handled {
			n[o.Schedule]++
		}
		return n
	}
	assert.Equal(t, map[string]int{"a": 4, "b": 4}, count())
	states, err := s.States(r.ctx)
	require.NoError(t, err)
	require.Len(t, states, 1, "a removed schedule is not this scheduler's")
	assert.Equal(t, "b", states[0].Name)
}

func TestSchedulersRacingSendEachOccurrenceOnce(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(time.Second))
	sched := azdispatch.Schedule[string]{Name: "race", Every: 2 * time.Second, Messages: echo, Jitter: time.Second}
	r.jitter = sched.Jitter
	var s *azdispatch.Scheduler[string]
	for _, name := range []string{"a", "b", "c"} {
		s = r.scheduler(name, sched)
	}
	r.settle(s, "race")
	r.advance(s, "race", time.Minute, 500*time.Millisecond)
	occ := r.occurrences()
	require.Len(t, occ, 30)
	for i := 1; i < len(occ); i++ {
		assert.Equal(t, 2*time.Second, occ[i].Sub(occ[i-1]))
	}
	assert.EqualValues(t, 30, r.q.Transactions().Send, "no instance sent an occurrence another sent")
}

func TestAnOccurrenceClaimedByAHungInstanceIsSentByAnotherAndHandledOnce(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(time.Second))
	release := make(chan struct{})
	hung := azdispatch.Schedule[string]{Name: "job", Every: time.Minute, Messages: func(ctx context.Context, o azdispatch.Occurrence) ([]string, error) {
		<-release
		return echo(ctx, o)
	}}
	healthy := hung
	healthy.Messages = echo
	first, stop := r.schedulerUntil("hung", hung)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		stop()
	}()
	r.settle(first, "job")
	r.clock.Advance(time.Minute)
	require.Eventually(t, func() bool {
		states, err := first.States(r.ctx)
		return err == nil && len(states) == 1 && states[0].ClaimedBy == "hung"
	}, 10*time.Second, time.Millisecond)
	other := r.scheduler("healthy", healthy)

	r.clock.Advance(16 * time.Second) // past the claim timeout
	st := r.settle(other, "job")
	assert.Equal(t, "healthy", st.LastBy)
	assert.Equal(t, []time.Time{schedStart.Add(time.Minute)}, r.occurrences())

	close(release) // the hung instance sends its copy late: a duplicate
	require.Eventually(t, func() bool { return r.l.State().Duplicates == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, []time.Time{schedStart.Add(time.Minute)}, r.occurrences(), "handled once")
}

// An instance that finds another's claim waits for its end, with no read
// in between, even when the schedule's next occurrence is already due
// (the claimant is slow, and will send it).
func TestAnInstanceWaitingForAnothersClaimMakesNoRequest(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t, schedStart.Add(500*time.Millisecond))
	release := make(chan struct{})
	slow := azdispatch.Schedule[string]{Name: "tick", Every: time.Second, Messages: func(ctx context.Context, o azdispatch.Occurrence) ([]string, error) {
		<-release
		return echo(ctx, o)
	}}
	first, stop := r.schedulerUntil("slow", slow)
	defer func() {
		close(release)
		stop()
	}()
	r.settle(first, "tick")
	r.clock.Advance(time.Second)
	require.Eventually(t, func() bool {
		states, err := first.States(r.ctx)
		return err == nil && len(states) == 1 && states[0].ClaimedBy == "slow"
	}, 10*time.Second, time.Millisecond)
	r.clock.Advance(time.Second) // the following occurrence is due too
	healthy := slow
	healthy.Messages = echo
	r.scheduler("other", healthy)
	reads := func() int64 { return r.q.Transactions().BlobRead }
	require.Eventually(t, func() bool { return reads() >= 3 }, 10*time.Second, time.Millisecond, "the other's first read")
	before := reads()
	time.Sleep(2 * time.Second) // several staggers' worth
	assert.LessOrEqual(t, reads()-before, int64(1), "no polling while the claim holds")
}

// A Next function replaced with a new Version is a new timetable: it goes
// on from now, and its occurrences before the old one's next are sent.
// (Every Next had the same spec, so a replaced one kept the old next
// occurrence: an hourly timetable replaced by one every minute sent nothing
// for the rest of the hour.) Replaced without a new Version, the stored
// next occurrence is kept, as Add's documentation says.
func TestAReplacedNextWithANewVersionTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	hourly := func(after time.Time) time.Time { return after.Truncate(time.Hour).Add(time.Hour) }
	minutely := func(after time.Time) time.Time { return after.Truncate(time.Minute).Add(time.Minute) }
	for _, tc := range []struct {
		version string
		want    int // occurrences in the 10 minutes after the change
	}{{"every minute", 10}, {"", 0}} {
		t.Run("version "+tc.version, func(t *testing.T) {
			t.Parallel()
			r := newSchedRig(t, schedStart.Add(10*time.Second))
			s := r.scheduler("a", azdispatch.Schedule[string]{Name: "report", Next: hourly, Messages: echo})
			st := r.settle(s, "report")
			require.Equal(t, schedStart.Add(time.Hour), st.Next)
			require.Equal(t, "func", st.Spec)

			require.NoError(t, s.Add(azdispatch.Schedule[string]{Name: "report", Next: minutely, Version: tc.version, Messages: echo}))
			if tc.version != "" {
				require.Eventually(t, func() bool {
					st, err := s.States(r.ctx)
					return err == nil && len(st) == 1 && st[0].Spec == "func "+tc.version
				}, 10*time.Second, time.Millisecond, "the state takes the new timetable")
			}
			r.advance(s, "report", 10*time.Minute, 30*time.Second)
			assert.Len(t, r.occurrences(), tc.want)
		})
	}
}

// Version names a Next's timetable: refused beside Every or Cron, and
// beyond 64 bytes.
func TestAScheduleVersionIsForNextOnly(t *testing.T) {
	t.Parallel()
	q := memqueue.New("jobs", nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, nil)
	require.NoError(t, err)
	err = s.Add(azdispatch.Schedule[string]{Name: "x", Every: time.Minute, Version: "v2", Messages: echo})
	require.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Schedule.Version")
	err = s.Add(azdispatch.Schedule[string]{Name: "x", Next: func(t time.Time) time.Time { return t.Add(time.Hour) }, Version: strings.Repeat("v", 65), Messages: echo})
	require.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
}
