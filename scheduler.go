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
	"github.com/azdispatch/azdispatch/internal/timetable"
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
// or later, and need a record store to mark in: their payload store (or,
// over memqueue, the queue's records). A listener without one (a queue
// opened by its SAS URL, with no [ListenerOptions.Payloads]) cannot tell a
// duplicate, and handles it.
//
// Requests: per occurrence, the sending instance makes 3 (a read, the
// claim, the move on) besides its sends, each other instance 1 read, and
// the listener 1 write per message; nothing between occurrences. A
// [Lease] held for the same purpose renews all day.
//
// A Scheduler over a memqueue.Queue keeps its records in memory, on the
// queue's clock: for tests, and for schedulers in one process.
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
}

// scheduled is a schedule added to a scheduler.
type scheduled[T any] struct {
	Schedule[T]
	next   func(time.Time) time.Time
	spec   string
	record string
	stop   context.CancelFunc // ends its loop, if running
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
// schedules' state beside p's payloads (see [PublisherOptions.Payloads]),
// or, for a target that keeps records of its own (a memqueue.Queue), there.
// Nil opts means defaults. It fails with [ErrNoBlobService] if p has
// neither.
func NewScheduler[T any](p *Publisher[T], opts *SchedulerOptions) (*Scheduler[T], error) {
	var o SchedulerOptions
	if opts != nil {
		o = *opts
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	store := recordsOf(p.target, p.store)
	if store == nil {
		return nil, fmt.Errorf("azdispatch: a scheduler keeps its state in the payload store: %w", p.noStore())
	}
	return &Scheduler[T]{p: p, store: store, opts: o, schedules: map[string]*scheduled[T]{}, stagger: rand.N(maxStagger),
		log: o.Logger.With("queue", p.target.Name(), "instance", o.Instance)}, nil
}

// Add adds a schedule, or replaces the one of the same name; a running
// scheduler starts it at once. A schedule whose timetable changed since
// its state was written goes on from its next occurrence after now. While
// instances run different timetables for one name (a rolling deploy),
// each rewrites the state to its own when it wakes: occurrences the two do
// not share may be skipped until every instance runs the new one.
func (s *Scheduler[T]) Add(sch Schedule[T]) error {
	next, spec, err := timetableOf(&sch)
	if err != nil {
		return err
	}
	if sch.CatchUp == 0 {
		sch.CatchUp = 10
	}
	sc := &scheduled[T]{Schedule: sch, next: next, spec: spec,
		record: recordName(payload.KindSchedule, s.p.target.Name(), sch.Name)}
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
			return states, fmt.Errorf("azdispatch: schedule %q: %w", sc.Name, err)
		}
		st, err := timetable.DecodeState(r.Value)
		if err != nil {
			return states, fmt.Errorf("azdispatch: schedule %q: %w: %w", sc.Name, ErrPayloadCorrupt, err)
		}
		states = append(states, stateOf(st))
	}
	return states, nil
}
