package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch/internal/pause"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/timetable"
)

// An operator pauses, resumes or runs now a schedule by changing its
// record, from any process that reaches its store: the schedulers find the
// change when they next read it (see [SchedulerOptions.Watch]). The
// times are the store's, so a machine whose clock is off neither ends a
// pause early nor holds it late.

// runNowMerge is how close two run-nows must be to be one: a second asked
// while the first waits to be sent, or within this long after it was asked,
// is the same, so that two operators who click at once, or one who clicks
// twice, get one occurrence.
const runNowMerge = 10 * time.Second

// changeTries bounds the writes of a change that keep finding the record
// changed since it was read: a scheduler claiming or moving on writes it
// about twice per occurrence.
const changeTries = 5

// PauseSchedule pauses the schedule name that sends to queue for at least
// d on the store's clock (its end is kept to the second, up to two seconds
// later): no scheduler sends its occurrences until the pause ends
// (or [PayloadStore.ResumeSchedule]); then those that fell in the pause
// were missed, and the schedule's [Misfire] policy says which are sent. A
// run-now is still sent. A pause given while one holds replaces it. It
// makes a read and a write, and fails with [ErrScheduleNotFound] if no
// scheduler has started the schedule.
func (s *PayloadStore) PauseSchedule(ctx context.Context, queue, name string, d time.Duration, opts *PauseOptions) (ScheduleState, error) {
	f, err := pauseChange(d, opts)
	if err != nil {
		return ScheduleState{}, err
	}
	return changeSchedule(ctx, s.records, queue, name, f)
}

// ResumeSchedule ends the pause of the schedule name that sends to queue
// now; it changes nothing (one read) if none holds.
func (s *PayloadStore) ResumeSchedule(ctx context.Context, queue, name string) (ScheduleState, error) {
	return changeSchedule(ctx, s.records, queue, name, resumeChange)
}

// RunScheduleNow asks for one occurrence of the schedule name that sends
// to queue, besides its timetable, paused or not: the first scheduler to
// read the schedule's state sends it, once across every instance, with
// [Occurrence.RunNow] set and its At the time it was asked. A run-now
// asked while another waits, or within ten seconds of one, is that one
// (see [ScheduleState.RunNow]). It fails with [ErrScheduleEnded] for a
// schedule whose timetable has ended.
func (s *PayloadStore) RunScheduleNow(ctx context.Context, queue, name string) (ScheduleState, error) {
	return changeSchedule(ctx, s.records, queue, name, runNowChange())
}

// Pause pauses the schedule name of this scheduler's queue for d: see
// [PayloadStore.PauseSchedule]. This scheduler sees it at once; the others
// within [SchedulerOptions.Watch].
func (s *Scheduler[T]) Pause(ctx context.Context, name string, d time.Duration, opts *PauseOptions) (ScheduleState, error) {
	f, err := pauseChange(d, opts)
	if err != nil {
		return ScheduleState{}, err
	}
	return s.change(ctx, name, f)
}

// Resume ends the pause of the schedule name: see
// [PayloadStore.ResumeSchedule].
func (s *Scheduler[T]) Resume(ctx context.Context, name string) (ScheduleState, error) {
	return s.change(ctx, name, resumeChange)
}

// RunNow asks for one occurrence of the schedule name besides its
// timetable: see [PayloadStore.RunScheduleNow]. This scheduler, if it runs
// the schedule, sends it at once.
func (s *Scheduler[T]) RunNow(ctx context.Context, name string) (ScheduleState, error) {
	return s.change(ctx, name, runNowChange())
}

// change changes the state of schedule name of this scheduler's queue, and
// wakes its loop here, if it has one.
func (s *Scheduler[T]) change(ctx context.Context, name string, f scheduleChange) (ScheduleState, error) {
	st, err := changeSchedule(ctx, s.store, s.p.target.Name(), name, f)
	if err != nil {
		return st, err
	}
	s.mu.Lock()
	if sc := s.schedules[name]; sc != nil {
		select {
		case sc.poke <- struct{}{}:
		default: // a wake is already on its way
		}
	}
	s.mu.Unlock()
	return st, nil
}

// A scheduleChange changes a schedule's state at now, on the store's clock,
// and reports whether there is anything to write. It is called again, with
// the record read anew, when its write found the record changed: by a
// scheduler or another operator in between, or by its own earlier write
// whose answer was lost (the SDK tried again, and the condition failed).
// So each remembers what it first wrote, and finds it there.
type scheduleChange func(st *timetable.State, now time.Time) (bool, error)

// pauseChange pauses for d, or fails with the options' mistake before any
// request.
func pauseChange(d time.Duration, opts *PauseOptions) (scheduleChange, error) {
	o, err := checkPause(d, opts)
	if err != nil {
		return nil, err
	}
	var mine timetable.Pause // as first written
	return func(st *timetable.State, now time.Time) (bool, error) {
		switch {
		case mine.Until.IsZero():
			mine = timetable.Pause{Since: now.Truncate(time.Second), Until: pause.EndOf(now, d), By: o.By}
		case st.Pause.Since.Equal(mine.Since) && st.Pause.By == mine.By:
			// Written: a resume since is another operator's, and stands.
			return false, nil
		}
		st.Pause = mine
		return true, nil
	}, nil
}

// resumeChange ends a pause that holds. The pause is kept, ended now, so
// that the scheduler that sends next knows which occurrences it held.
func resumeChange(st *timetable.State, now time.Time) (bool, error) {
	if !st.Pause.Holds(now) {
		return false, nil
	}
	st.Pause.Until = now
	return true, nil
}

// runNowChange asks for a run now, unless one waits or was just asked.
func runNowChange() scheduleChange {
	var asked time.Time // as first written
	return func(st *timetable.State, now time.Time) (bool, error) {
		switch {
		case st.Done:
			return false, ErrScheduleEnded
		case !st.RunNow.IsZero():
			return false, nil // waiting: this one, or one it is the same as
		case !asked.IsZero() && !st.LastRunNow.Before(asked):
			return false, nil // written, and sent already
		case !st.LastRunNow.IsZero() && now.Sub(st.LastRunNow) < runNowMerge:
			return false, nil
		}
		if asked.IsZero() {
			asked = now.Truncate(time.Second)
		}
		st.RunNow = asked
		return true, nil
	}
}

// changeSchedule applies f to the state of the schedule name of queue, and
// writes it if f asks, under the ETag it read: a scheduler or another
// operator that wrote in between makes it read and apply f again.
func changeSchedule(ctx context.Context, store records.Store, queue, name string, f scheduleChange) (ScheduleState, error) {
	if name == "" {
		return ScheduleState{}, &ConfigError{Field: "schedule name", Reason: "empty"}
	}
	record := recordName(payload.KindSchedule, queue, name)
	for try := 1; ; try++ {
		r, err := store.Read(ctx, record)
		if errors.Is(err, records.ErrMissing) {
			return ScheduleState{}, wrapf(fmt.Errorf("%w (no scheduler has started it)", ErrScheduleNotFound), "schedule %q of queue %q", name, queue)
		}
		if err != nil {
			return ScheduleState{}, wrapf(err, "schedule %q", name)
		}
		st, err := timetable.DecodeState(r.Value)
		if err != nil {
			return ScheduleState{}, fmt.Errorf("%w: schedule %q: %w", ErrPayloadCorrupt, name, err)
		}
		write, err := f(st, store.Now())
		if err != nil {
			return stateOf(st), wrapf(err, "schedule %q", name)
		}
		if !write {
			return stateOf(st), nil
		}
		r.Value = st.Encode()
		err = store.Write(ctx, record, r)
		if errors.Is(err, records.ErrChanged) && try < changeTries {
			syncx.Sleep(ctx, time.Duration(try)*50*time.Millisecond, nil)
			continue
		}
		if err != nil {
			return ScheduleState{}, wrapf(err, "schedule %q", name)
		}
		return stateOf(st), nil
	}
}
