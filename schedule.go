package azdispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/cron"
	"github.com/azdispatch/azdispatch/internal/pause"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/timetable"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// Schedule is a periodic dispatch: when its occurrences are, and the
// messages each sends. Give exactly one of Every, Cron and Next.
type Schedule[T any] struct {
	// Name identifies the schedule among those of the publisher's target,
	// in every process: up to 64 bytes.
	Name string
	// Every fires at each multiple of it since the zero time, in UTC: an
	// hourly schedule fires on the hour, one every 2 s at even seconds.
	// Whole seconds, at least 1 s.
	Every time.Duration
	// Cron fires at the times of a five-field cron expression ("minute
	// hour day-of-month month day-of-week", with ranges, lists, steps and
	// names) or one of @yearly, @monthly, @weekly, @daily and @hourly, in
	// Location, read as Vixie cron reads them: when both day fields are
	// restricted a day matches either, and a field that starts with "*"
	// ("*/2" too) is unrestricted, so "0 0 */2 * MON" fires on Mondays that
	// are odd days of the month. At a daylight-saving change, a time that
	// the change skips (02:30 on a spring day in Europe/Berlin) has no
	// occurrence that day, and a time that it repeats has one, at its
	// first instant.
	Cron string
	// Location is Cron's time zone. Defaults to UTC.
	Location *time.Location
	// Next is a timetable of your own: the first occurrence strictly after
	// after, or the zero time when there are no more (the schedule then
	// ends, and says so in its state).
	Next func(after time.Time) time.Time
	// Version names the timetable Next computes: change it whenever Next
	// changes (up to 64 bytes, any text: "v2", "working hours from
	// 2027-01"). A function cannot be compared, so the schedule's state
	// tells one timetable from another by Every, Cron and Location, and,
	// for Next, by Version alone (see [Scheduler.Add]). Only with Next.
	Version string
	// Messages returns the bodies to send for an occurrence, in order (none
	// is fine). It is called again if a send fails or another instance
	// takes over the occurrence, so it should depend on o alone.
	Messages func(ctx context.Context, o Occurrence) ([]T, error)
	// Misfire says what becomes of occurrences missed (see [Misfire]).
	// Defaults to [MisfireOne].
	Misfire Misfire
	// CatchUp bounds the missed occurrences [MisfireEach] sends: the
	// latest ones. Defaults to 10.
	CatchUp int
	// Jitter spreads the occurrence's send over up to this long after its
	// time (the same in every process), so that many schedules of many
	// services firing on the hour do not all send at once. It must be less
	// than Every, and should be well under the spacing of a Cron's or a
	// Next's occurrences.
	Jitter time.Duration
}

// Misfire is a [Schedule]'s policy for occurrences missed: not sent within
// [SchedulerOptions.Grace] of their time, because no instance ran, or
// because their sends kept failing (storage unreachable, Messages
// failing) for longer than that.
type Misfire int

const (
	// MisfireOne sends one catch-up for any number of missed occurrences:
	// the latest, with [Occurrence.Missed] counting those before it.
	MisfireOne Misfire = iota
	// MisfireSkip sends none of them: the schedule goes on from the next
	// occurrence.
	MisfireSkip
	// MisfireEach sends each of them, up to [Schedule.CatchUp] (the
	// latest ones), oldest first.
	MisfireEach
)

// Occurrence is one occurrence of a [Schedule]: what [Schedule.Messages]
// builds messages for, and what a handler finds in [MessageInfo.Occurrence].
type Occurrence struct {
	Schedule string
	At       time.Time // its time, in UTC, to the second
	// Late says it is sent later than [SchedulerOptions.Grace] after its
	// time: a catch-up after no scheduler ran.
	Late bool
	// Missed counts the earlier occurrences, missed, that this one stands
	// for: they were not sent (see [Misfire]).
	Missed int64
	// Item is the message's index among the occurrence's messages, from 0
	// (on a [Message]; 0 for [Schedule.Messages]).
	Item int
	// RunNow says it was asked for by a run-now ([Scheduler.RunNow],
	// [PayloadStore.RunScheduleNow]), besides the timetable: At is when
	// it was asked, by the storage service's clock.
	RunNow bool
}

// ScheduleState is a schedule's state as its record holds it: shared by
// every scheduler of the schedule.
type ScheduleState struct {
	Name  string
	Queue string // the publisher's target
	Spec  string // the timetable: "every 2s", "cron 0 3 * * * Europe/Berlin", or "func" and its Version ("func v2")
	// Next is the first occurrence not yet sent; zero once the schedule has
	// ended.
	Next time.Time
	// Last is the last occurrence of the timetable sent (a run now is
	// LastRunNow's), LastBy the instance that sent it, LastSent when (by
	// the storage service's clock) and LastLate whether it was late. Zero
	// before the first.
	Last     time.Time
	LastBy   string
	LastSent time.Time
	LastLate bool
	// Sent and Skipped count occurrences sent, and missed and not sent.
	Sent, Skipped int64
	// ClaimedBy is the instance sending the next occurrences now, if any.
	ClaimedBy string
	// Ended says the schedule's Next said there were no more.
	Ended bool
	// Paused is the schedule's pause (see [Scheduler.Pause]): zero if none,
	// or once the first scheduler to wake after its end has decided the
	// occurrences it held. Judge whether it holds with its Active and the
	// service's time.
	Paused PauseState
	// RunNow is when a run-now was asked for (see [Scheduler.RunNow]),
	// while no scheduler has sent it yet; zero if none is waiting.
	// LastRunNow is the time of the last one sent.
	RunNow     time.Time
	LastRunNow time.Time
}

// stateOf is what a record's state says, for the API.
func stateOf(s *timetable.State) ScheduleState {
	return ScheduleState{Name: s.Name, Queue: s.Queue, Spec: s.Spec, Next: s.Next, Last: s.Last, LastBy: s.LastBy,
		LastSent: s.LastSent, LastLate: s.LastLate, Sent: s.Sent, Skipped: s.Skipped, ClaimedBy: s.ClaimBy, Ended: s.Done,
		Paused: PauseState(s.Pause), RunNow: s.RunNow, LastRunNow: s.LastRunNow}
}

// timetableOf checks a schedule and returns its timetable and how it reads.
func timetableOf[T any](s *Schedule[T]) (func(time.Time) time.Time, string, error) {
	bad := func(field, reason string) error {
		return &ConfigError{Field: "Schedule." + field, Reason: fmt.Sprintf("schedule %q: %s", s.Name, reason)}
	}
	switch {
	case s.Name == "" || len(s.Name) > wire.MaxSchedule || strings.ContainsAny(s.Name, "\x00\n"):
		return nil, "", bad("Name", "must be 1 to 64 bytes, without NUL or newline")
	case s.Messages == nil:
		return nil, "", bad("Messages", "missing")
	case (s.Every != 0) == (s.Cron != "") && (s.Every != 0 || s.Next == nil) || s.Next != nil && (s.Every != 0 || s.Cron != ""):
		return nil, "", bad("Every", "give exactly one of Every, Cron and Next")
	case s.Every < 0 || s.Every%time.Second != 0:
		return nil, "", bad("Every", fmt.Sprintf("%v: whole seconds, at least 1s", s.Every))
	case s.Jitter < 0 || s.CatchUp < 0 || s.Misfire < MisfireOne || s.Misfire > MisfireEach:
		return nil, "", bad("Jitter", "Jitter, CatchUp and Misfire must be valid")
	case s.Every > 0 && s.Jitter >= s.Every:
		return nil, "", bad("Jitter", fmt.Sprintf("%v: less than Every (%v)", s.Jitter, s.Every))
	case s.Version != "" && s.Next == nil:
		return nil, "", bad("Version", "names a Next function's timetable: set only with Next (Every and Cron say what they are)")
	case len(s.Version) > wire.MaxSchedule || strings.ContainsAny(s.Version, "\x00\n"):
		return nil, "", bad("Version", "must be up to 64 bytes, without NUL or newline")
	}
	switch {
	case s.Every > 0:
		return timetable.Every(s.Every), "every " + s.Every.String(), nil
	case s.Cron != "":
		c, err := cron.Parse(s.Cron)
		if err != nil {
			return nil, "", bad("Cron", err.Error())
		}
		loc := s.Location
		if loc == nil {
			loc = time.UTC
		}
		return func(after time.Time) time.Time { return c.Next(after, loc) }, "cron " + s.Cron + " " + loc.String(), nil
	}
	next := s.Next
	return func(after time.Time) time.Time {
		// Occurrences are whole seconds, as messages carry them; one that
		// does not move on is taken a second later.
		t := next(after)
		if t.IsZero() {
			return t
		}
		if c := t.Truncate(time.Second); !c.Equal(t) {
			t = c.Add(time.Second)
		}
		if !t.After(after) {
			t = after.Truncate(time.Second).Add(time.Second)
		}
		return t
	}, strings.TrimSpace("func " + s.Version), nil
}

// Schedules lists the state of every schedule whose [Scheduler] keeps it in
// this store, by queue and name: one List Blobs request per 5,000 blobs of
// the container, and one read per schedule.
func (s *PayloadStore) Schedules(ctx context.Context) ([]ScheduleState, error) {
	var states []ScheduleState
	err := s.blobs.List(ctx, "", func(page []blobs.Info, _ time.Time) error {
		for _, item := range page {
			if meta, ok := payload.ParseStrings(item.Metadata); !ok || meta.Kind != payload.KindSchedule {
				continue
			}
			r, err := s.records.Read(ctx, item.Name)
			if errors.Is(err, records.ErrMissing) {
				continue // removed since the listing
			}
			if err != nil {
				return err
			}
			st, err := timetable.DecodeState(r.Value)
			if err != nil {
				return fmt.Errorf("%w: %s/%s: %w", ErrPayloadCorrupt, s.Container(), item.Name, err)
			}
			states = append(states, stateOf(st))
		}
		return nil
	})
	var se *StorageError
	if err != nil && !errors.Is(err, ErrPayloadCorrupt) && !errors.As(err, &se) {
		err = s.err(opBlobList, "", err)
	}
	if err != nil {
		return states, err
	}
	slices.SortFunc(states, func(a, b ScheduleState) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Name, b.Name))
	})
	return states, nil
}

// SchedulerOptions configures a [Scheduler]. Nil, or a zero field, means
// the default.
type SchedulerOptions struct {
	// Instance names this scheduler in the schedules' state: who sent an
	// occurrence, who is sending one. Defaults to the host name, the
	// process ID and a random suffix.
	Instance string
	// ClaimTimeout is how long an instance's claim on an occurrence holds:
	// an instance that has not sent it by then (it died, or paused) is
	// taken over by another, so an occurrence is sent at most about this
	// late after a crash. It must exceed the time one wake's sends take,
	// and bounds each wake's requests: a store that hangs fails a wake
	// then. Defaults to 15 s; at least 2 s.
	ClaimTimeout time.Duration
	// Grace is how late an occurrence may be sent and still count as on
	// time (after its [Schedule.Jitter]); one later was missed, and the
	// schedule's [Misfire] policy says what becomes of it. Defaults to,
	// and is at least, twice ClaimTimeout, so that a taken-over occurrence
	// is on time.
	Grace time.Duration
	// Watch is how often each instance reads a schedule's state while it
	// waits for an occurrence further off, so as to see a pause, a resume
	// or a run-now asked for in another process (the command-line tool,
	// the dashboard, [PayloadStore.PauseSchedule]): one read per schedule
	// and instance per Watch, and none for a schedule whose occurrences
	// come sooner. This scheduler's own [Scheduler.Pause], [Scheduler.Resume]
	// and [Scheduler.RunNow] are seen at once. Defaults to 30 s; negative
	// means never: the others are then seen at the next occurrence, or at
	// the end of the pause.
	Watch time.Duration
	// Logger receives the scheduler's events. Defaults to [slog.Default].
	Logger *slog.Logger
}

// withDefaults fills zero fields and checks the rest.
func (o SchedulerOptions) withDefaults() (SchedulerOptions, error) {
	if o.Instance == "" {
		host, _ := os.Hostname()
		o.Instance = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.N(1<<16))
	}
	if o.ClaimTimeout == 0 {
		o.ClaimTimeout = 15 * time.Second
	}
	if o.ClaimTimeout < 2*time.Second {
		return o, &ConfigError{Field: "SchedulerOptions.ClaimTimeout", Reason: fmt.Sprintf("%v: at least 2s", o.ClaimTimeout)}
	}
	if o.Grace == 0 {
		o.Grace = 2 * o.ClaimTimeout
	}
	if o.Grace < 2*o.ClaimTimeout {
		return o, &ConfigError{Field: "SchedulerOptions.Grace", Reason: fmt.Sprintf("%v: at least twice ClaimTimeout (%v)", o.Grace, o.ClaimTimeout)}
	}
	if o.Watch == 0 {
		o.Watch = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

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
