package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/route"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/timetable"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// Scheduler sends messages on schedules through a [Publisher], so that
// offload, metadata, middleware and tracing all apply. Run one in every
// instance of a service: each occurrence of a schedule is handled once
// across them all.
//
// How: each schedule has one record in the publisher's payload store (a
// small blob, "schedule" in its metadata) that holds its next occurrence,
// its last, and who sent it. Every instance sleeps until the next
// occurrence (no request while it waits), reads the record, and one claims
// the occurrence with a conditional write (If-Match); it sends, then
// moves the record on to the following occurrence with another. An
// instance that dies or pauses with a claim is taken over after
// [SchedulerOptions.ClaimTimeout]. A claim alone cannot tell a crash
// before the send from one after it, so each message also carries its
// occurrence: the first listener to deliver a message of an occurrence
// marks it (one conditional write), and a listener that finds the mark of
// another message deletes its own unhandled, as a duplicate (counted in
// [State.Duplicates]). So each occurrence's messages are handled once,
// whoever sends them and however often. Listeners must be of this version
// or later, and need a record store to mark in: their payload store (over
// memqueue, the queue's own, in memory). A listener without one (a queue
// opened by its SAS URL, with no [PayloadOptions.Store]) cannot tell a
// duplicate, and handles it.
//
// Requests: per occurrence, the sending instance makes 3 (a read, the
// claim, the move on) besides its sends, each other instance 1 read, and
// the listener 1 write per message; between occurrences further apart
// than [SchedulerOptions.Watch], each instance reads each schedule once per
// Watch (2,880 reads a day at the default 30 s), to see a pause or a
// run-now asked elsewhere. A [Lease] held for the same purpose renews all
// day.
//
// An operator pauses a schedule ([Scheduler.Pause],
// [PayloadStore.PauseSchedule], the command-line tool, the dashboard)
// until a time on the store's clock, after which its schedule's [Misfire]
// policy decides the occurrences that fell in the pause, and asks for a
// run now ([Scheduler.RunNow]): one occurrence besides the timetable,
// sent once across the instances.
//
// A Scheduler over a memqueue.Queue keeps its records in the queue's
// payload store, in memory on the queue's clock: for tests, and for
// schedulers in one process.
type Scheduler[T any] struct {
	p     *Publisher[T]
	store records.Store
	opts  SchedulerOptions
	log   *slog.Logger
	// stagger delays this instance's reads after each wake (see loop):
	// drawn once, up to maxStagger.
	stagger time.Duration

	mu        sync.Mutex
	schedules map[string]*scheduled[T]
	run       *schedulerRun // nil unless Run is running
	// failing holds, by schedule, the failures in a row of its state's
	// reads and writes (or its sends), and the last: for Ready.
	failing map[string]failureRun
}

// failureRun is one schedule's failures in a row.
type failureRun struct {
	n     int
	since time.Time
	last  error
}

// readySchedulerFailures is how many failures in a row of one schedule
// make a scheduler not ready: with the back-off of 1 and 2 s, a few
// seconds of a store that refuses, and about three claim timeouts (45 s
// at the default) of one that hangs.
const readySchedulerFailures = 3

// Ready reports whether the scheduler is doing its work, for a readiness
// probe (an endpoint.Health check): nil while [Scheduler.Run] is running
// and every schedule's state can be read and written; otherwise an error
// matching [ErrNotReady] that says why (not running, or a schedule whose
// requests failed three times in a row, with the last failure). It makes
// no request.
func (s *Scheduler[T]) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return fmt.Errorf("%w: the scheduler is not running", ErrNotReady)
	}
	var errs []error
	for name, f := range s.failing {
		if f.n >= readySchedulerFailures {
			errs = append(errs, fmt.Errorf("schedule %q failed %d times in a row since %s: %w", name, f.n, f.since.UTC().Format(time.RFC3339), f.last))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrNotReady, joinErrs(errs...))
	}
	return nil
}

// outcome records how a step of schedule name went, for Ready.
func (s *Scheduler[T]) outcome(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.failing, name)
		return
	}
	if s.failing == nil {
		s.failing = map[string]failureRun{}
	}
	f := s.failing[name]
	if f.n == 0 {
		f.since = time.Now()
	}
	f.n++
	f.last = err
	s.failing[name] = f
}

// scheduled is a schedule added to a scheduler.
type scheduled[T any] struct {
	Schedule[T]
	next   func(time.Time) time.Time
	spec   string
	record string
	stop   context.CancelFunc // ends its loop, if running
	// poke wakes its loop to read the state at once: this scheduler's own
	// Pause, Resume or RunNow changed it.
	poke chan struct{}
}

// schedulerRun is what Add and Remove need of a running Run.
type schedulerRun struct {
	ctx context.Context
	wg  *sync.WaitGroup
}

// maxStagger bounds an instance's stagger: long enough for one to claim
// before the others read, short beside a claim timeout.
const maxStagger = 300 * time.Millisecond

// NewScheduler returns a scheduler that sends through p and keeps its
// schedules' state beside p's payloads (see [PublisherOptions.Payloads];
// over a memqueue.Queue, by default, the queue's own store, in memory).
// Nil opts means defaults. It fails with [ErrNoBlobService] if p has no
// payload store.
func NewScheduler[T any](p *Publisher[T], opts *SchedulerOptions) (*Scheduler[T], error) {
	var o SchedulerOptions
	if opts != nil {
		o = *opts
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	store := recordsOf(p.store)
	if store == nil {
		return nil, wrapf(p.noStore(), "a scheduler keeps its state in the payload store")
	}
	return &Scheduler[T]{p: p, store: store, opts: o, schedules: map[string]*scheduled[T]{}, stagger: rand.N(maxStagger),
		log: o.Logger.With("queue", p.target.Name(), "instance", o.Instance)}, nil
}

// Add adds a schedule, or replaces the one of the same name; a running
// scheduler starts it at once. A schedule whose timetable changed since
// its state was written goes on from its next occurrence after now,
// sending none of the old timetable's still to come. A timetable is known
// by its Every, its Cron and Location, or, for a Next of your own, its
// [Schedule.Version]: a Next replaced without a new Version is taken for
// the same timetable, so the state's next occurrence (computed by the old
// Next) is waited for and sent first, and the new Next only computes the
// occurrences after it (a schedule changed from hourly to every minute
// would send nothing until the next hour). While instances run different
// timetables for one name (a rolling deploy), each rewrites the state to
// its own when it wakes: occurrences the two do not share may be skipped
// until every instance runs the new one.
func (s *Scheduler[T]) Add(sch Schedule[T]) error {
	next, spec, err := timetableOf(&sch)
	if err != nil {
		return err
	}
	if sch.CatchUp == 0 {
		sch.CatchUp = 10
	}
	sc := &scheduled[T]{Schedule: sch, next: next, spec: spec,
		record: recordName(payload.KindSchedule, s.p.target.Name(), sch.Name), poke: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.schedules[sch.Name]; old != nil && old.stop != nil {
		old.stop()
	}
	s.schedules[sch.Name] = sc
	if s.run != nil {
		s.start(sc)
	}
	return nil
}

// Remove stops a schedule in this scheduler, and reports whether it had
// it. Its state stays, for other instances and for when it is added again.
func (s *Scheduler[T]) Remove(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.schedules[name]
	if ok {
		if sc.stop != nil {
			sc.stop()
		}
		delete(s.schedules, name)
		delete(s.failing, name)
	}
	return ok
}

// Run sends the schedules' occurrences until ctx ends, then returns nil
// once every send under way has finished. A schedule whose storage
// requests fail is retried, with a back-off up to a minute, and logged;
// it does not stop the others. Run may be called once at a time.
func (s *Scheduler[T]) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	s.mu.Lock()
	if s.run != nil {
		s.mu.Unlock()
		return errors.New("azdispatch: Scheduler.Run is already running")
	}
	s.run = &schedulerRun{ctx: ctx, wg: &wg}
	for _, sc := range s.schedules {
		s.start(sc)
	}
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.run = nil
	s.failing = nil
	for _, sc := range s.schedules {
		sc.stop = nil
	}
	s.mu.Unlock()
	wg.Wait()
	return nil
}

// start starts sc's loop under the running Run. Called with s.mu held.
func (s *Scheduler[T]) start(sc *scheduled[T]) {
	ctx, stop := context.WithCancel(s.run.ctx)
	sc.stop = stop
	s.run.wg.Go(func() {
		defer stop()
		s.loop(ctx, sc)
	})
}

// States reads the state of each schedule added, by name: one read each.
// A schedule no instance has started yet has none, and is left out.
func (s *Scheduler[T]) States(ctx context.Context) ([]ScheduleState, error) {
	s.mu.Lock()
	list := make([]*scheduled[T], 0, len(s.schedules))
	for _, sc := range s.schedules {
		list = append(list, sc)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *scheduled[T]) int { return strings.Compare(a.Name, b.Name) })
	var states []ScheduleState
	for _, sc := range list {
		r, err := s.store.Read(ctx, sc.record)
		if errors.Is(err, records.ErrMissing) {
			continue
		}
		if err != nil {
			return states, wrapf(err, "schedule %q", sc.Name)
		}
		st, err := timetable.DecodeState(r.Value)
		if err != nil {
			return states, fmt.Errorf("azdispatch: schedule %q: %w: %w", sc.Name, ErrPayloadCorrupt, err)
		}
		states = append(states, stateOf(st))
	}
	return states, nil
}

// loop runs one schedule until ctx ends or the schedule does: it wakes
// when step says, and backs off after a failure.
func (s *Scheduler[T]) loop(ctx context.Context, sc *scheduled[T]) {
	backoff := time.Second
	for ctx.Err() == nil {
		// A step is bounded by a claim's time, which it must keep within
		// anyway: a store that hangs fails it then, rather than after the
		// SDK's tries of each request (minutes), and Ready says so.
		stepCtx, cancel := context.WithTimeout(ctx, s.opts.ClaimTimeout)
		wake, err := s.step(stepCtx, sc)
		cancel()
		if ctx.Err() == nil {
			s.outcome(sc.Name, err)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("schedule failed; trying again", "schedule", sc.Name, "in", backoff, "err", err)
			wake = s.store.Now().Add(backoff)
			backoff = min(2*backoff, time.Minute)
		case wake.IsZero():
			s.log.Info("schedule ended: its timetable has no more occurrences", "schedule", sc.Name)
			return
		default:
			backoff = time.Second
		}
		// A pause, a resume or a run-now asked in another process is
		// seen at the next look, so look at least once per Watch.
		if s.opts.Watch > 0 {
			wake = timeMin(wake, s.store.Now().Add(s.opts.Watch))
		}
		// Then this instance's stagger, on this machine's clock, so
		// that the instances do not all read at once and race for the
		// claim: the first claims, and the others, reading after, find
		// its claim and wait (one read each, instead of a refused claim
		// and a read again).
		if s.store.Sleep(ctx, wake, sc.poke) {
			syncx.Sleep(ctx, s.stagger, nil)
		}
	}
}

// step reads the schedule's record and does what is due: nothing yet, wait
// for another instance's claim, or claim, send and move on. It returns
// when to look again, by the store's clock (zero: never, the schedule has
// ended).
func (s *Scheduler[T]) step(ctx context.Context, sc *scheduled[T]) (time.Time, error) {
	r, st, err := s.read(ctx, sc)
	if err != nil {
		return time.Time{}, err
	}
	// The store's time by this machine's clock since the read's answer:
	// its Date is whole seconds, and a wake due within one (a jitter, a
	// stagger) would read again and again until the next second.
	now := s.store.Now()
	switch {
	case st.Spec != sc.spec:
		// A new schedule, or a changed one: it goes on from now.
		st.Spec, st.Next, st.Done, st.ClaimBy = sc.spec, sc.next(now), false, ""
		return s.write(ctx, sc, r, st)
	case st.Done:
		return time.Time{}, nil
	case st.ClaimBy != "" && st.ClaimBy != s.opts.Instance && now.Before(r.Written.Add(s.opts.ClaimTimeout)):
		// Another's claim: look when it lapses, or at the following
		// occurrence if sooner and still ahead (the claimant may finish
		// and then die); one already due is the claimant's to send.
		lapses := r.Written.Add(s.opts.ClaimTimeout)
		if following := sc.next(st.Next); !following.IsZero() && s.wakeFor(sc, following).After(now) {
			lapses = timeMin(lapses, s.wakeFor(sc, following))
		}
		return lapses, nil
	}
	plan, wait := s.plan(sc, st, now)
	if !wait.IsZero() {
		return wait, nil
	}
	// Claim, so that the other instances wait for this one rather than
	// send too.
	claimed := time.Now()
	st.ClaimBy = s.opts.Instance
	r.Value = st.Encode()
	if err := s.store.Write(ctx, sc.record, r); err != nil {
		return s.lost(err)
	}
	sent, err := s.send(ctx, sc, plan.Send, claimed)
	if err != nil {
		return time.Time{}, err
	}
	st.Next, st.ClaimBy, st.Done = plan.Next, "", plan.Next.IsZero()
	st.Sent += int64(sent)
	st.Skipped += plan.Skipped
	for _, o := range plan.Send {
		if !o.RunNow { // a run now is LastRunNow's
			st.Last, st.LastBy, st.LastSent, st.LastLate = o.At, s.opts.Instance, s.store.Now().Truncate(time.Second), o.Late
		}
	}
	if !st.RunNow.IsZero() {
		st.LastRunNow, st.RunNow = st.RunNow, time.Time{}
	}
	if !st.Pause.Holds(now) && !st.Next.Before(st.Pause.Until) {
		st.Pause = timetable.Pause{} // over, and its occurrences decided
	}
	if plan.Skipped > 0 {
		s.log.Warn("occurrences missed (not sent within the grace) were skipped", "schedule", sc.Name, "skipped", plan.Skipped)
	}
	return s.write(ctx, sc, r, st)
}

// plan says what a wake at now sends of st: the occurrences due, unless a
// pause holds, and a run-now if one was asked for. With nothing to send it
// returns, instead, when to look again: the next occurrence, or the
// pause's end.
func (s *Scheduler[T]) plan(sc *scheduled[T], st *timetable.State, now time.Time) (timetable.Plan, time.Time) {
	due := s.wakeFor(sc, st.Next)
	paused := st.Pause.Holds(now)
	var plan timetable.Plan
	switch {
	case paused || now.Before(due):
		if st.RunNow.IsZero() {
			if paused {
				return plan, st.Pause.Until
			}
			return plan, due
		}
		plan.Next = st.Next // the run-now alone
	default:
		grace := st.Pause.Grace(now, s.opts.Grace+sc.Jitter)
		plan = timetable.Decide(st.Next, now, sc.next, timetable.Misfire(sc.Misfire), sc.CatchUp, grace)
	}
	if !st.RunNow.IsZero() {
		plan.Send = append(plan.Send, timetable.Occurrence{At: st.RunNow, RunNow: true})
	}
	return plan, time.Time{}
}

// read reads sc's record, creating it first with the schedule's first
// occurrence after now if there is none (or finding that another instance
// just did), and reading it back.
func (s *Scheduler[T]) read(ctx context.Context, sc *scheduled[T]) (*records.Record, *timetable.State, error) {
	r, err := s.store.Read(ctx, sc.record)
	for try := 0; errors.Is(err, records.ErrMissing) && try < 2; try++ {
		// The first occurrence is the first after now by the store's
		// clock, which the answer that found no record told (every
		// answer tells it): never this machine's, which may be hours off.
		if !s.store.Known() {
			return nil, nil, fmt.Errorf("schedule %q: the store's answer did not tell its time", sc.Name)
		}
		now := s.store.Now()
		st := &timetable.State{Name: sc.Name, Queue: s.p.target.Name(), Spec: sc.spec, Next: sc.next(now)}
		st.Done = st.Next.IsZero()
		r = &records.Record{Kind: payload.KindSchedule, Value: st.Encode()}
		if err := s.store.Write(ctx, sc.record, r); err != nil && !errors.Is(err, records.ErrChanged) {
			return nil, nil, err
		}
		r, err = s.store.Read(ctx, sc.record)
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := timetable.DecodeState(r.Value)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: schedule %q: %w", ErrPayloadCorrupt, sc.Name, err)
	}
	r.Value = nil // written anew from st
	return r, st, nil
}

// write writes st to r's record if it is still as read, and says when to
// look next: at st's next occurrence, or at once if another instance
// wrote first.
func (s *Scheduler[T]) write(ctx context.Context, sc *scheduled[T], r *records.Record, st *timetable.State) (time.Time, error) {
	r.Value = st.Encode()
	if err := s.store.Write(ctx, sc.record, r); err != nil {
		return s.lost(err)
	}
	if st.Done {
		return time.Time{}, nil
	}
	return s.wakeFor(sc, st.Next), nil
}

// lost says what to do after a write: another instance's write first
// means to look again at once; any other failure is an error.
func (s *Scheduler[T]) lost(err error) (time.Time, error) {
	if errors.Is(err, records.ErrChanged) {
		return s.store.Now(), nil
	}
	return time.Time{}, err
}

// send sends the messages of occurrences, claimed at claimed by the local
// clock, and returns how many occurrences it sent. It stops once half the
// claim's time has gone (the process was paused, or the sends are slow):
// another instance may take over soon, and sends of either that overlap
// are duplicates for the listeners to drop.
func (s *Scheduler[T]) send(ctx context.Context, sc *scheduled[T], occs []timetable.Occurrence, claimed time.Time) (int, error) {
	for n, o := range occs {
		occ := Occurrence{Schedule: sc.Name, At: o.At.UTC(), Late: o.Late, Missed: o.Missed, RunNow: o.RunNow}
		bodies, err := messagesFor(ctx, sc, occ)
		if err != nil {
			return n, fmt.Errorf("schedule %q: messages for %s: %w", sc.Name, occ.At.Format(time.RFC3339), err)
		}
		for i, body := range bodies {
			if time.Since(claimed) > s.opts.ClaimTimeout/2 {
				return n, fmt.Errorf("schedule %q: %w", sc.Name, errClaimLapsing)
			}
			if _, _, err := s.p.publish(ctx, body, s.route(sc, o, i)); err != nil {
				return n, fmt.Errorf("schedule %q: send for %s: %w", sc.Name, occ.At.Format(time.RFC3339), err)
			}
		}
	}
	return len(occs), nil
}

// errClaimLapsing stops the sends of a claim that another instance may
// soon take over.
var errClaimLapsing = errors.New("half the claim timeout has passed; looking again before sending more")

// route is how message item of occurrence o of sc goes: due at its time,
// with the occurrence in its due line, and the name of the mark its first
// delivery writes (see Listener.deliverOnce).
func (s *Scheduler[T]) route(sc *scheduled[T], o timetable.Occurrence, item int) route.Route {
	at := o.At.UTC()
	key := fmt.Sprintf("%s\x00%d\x00%d", sc.Name, at.Unix(), item)
	if o.RunNow {
		key = fmt.Sprintf("%s\x00now\x00%d\x00%d", sc.Name, at.Unix(), item) // never a timetable's
	}
	once := recordName(payload.KindOnce, s.p.target.Name(), key)
	return route.Route{At: at, Occ: &wire.Occurrence{Schedule: sc.Name, At: at.Unix(), Item: item, Late: o.Late, Missed: o.Missed, RunNow: o.RunNow, Once: once}}
}

// messagesFor calls the schedule's Messages, turning a panic into a
// [*PanicError]: the occurrence is tried again, as for an error.
func messagesFor[T any](ctx context.Context, sc *scheduled[T], o Occurrence) (bodies []T, err error) {
	defer catchPanic(&err)
	return sc.Messages(ctx, o)
}

// timeMin is the earlier of a and b.
func timeMin(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// wakeFor is when the instances wake for occurrence at of sc: after its
// jitter, which every instance shares.
func (s *Scheduler[T]) wakeFor(sc *scheduled[T], at time.Time) time.Time {
	return at.Add(timetable.Jitter(sc.Name, at, sc.Jitter))
}
