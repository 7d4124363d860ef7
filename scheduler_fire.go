package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/azdispatch/azdispatch/internal/dueline"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/timetable"
)

// loop runs one schedule until ctx ends or the schedule does: it wakes
// when step says, and backs off after a failure.
func (s *Scheduler[T]) loop(ctx context.Context, sc *scheduled[T]) {
	backoff := time.Second
	for ctx.Err() == nil {
		wake, err := s.step(ctx, sc)
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
		// Then this instance's stagger, on this machine's clock, so
		// that the instances do not all read at once and race for the
		// claim: the first claims, and the others, reading after, find
		// its claim and wait (one read each, instead of a refused claim
		// and a read again).
		if s.store.Sleep(ctx, wake, nil) {
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
	if due := s.wakeFor(sc, st.Next); now.Before(due) {
		return due, nil
	}
	plan := timetable.Decide(st.Next, now, sc.next, timetable.Misfire(sc.Misfire), sc.CatchUp, s.opts.Grace+sc.Jitter)
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
	if n := len(plan.Send); n > 0 {
		last := plan.Send[n-1]
		st.Last, st.LastBy, st.LastSent, st.LastLate = last.At, s.opts.Instance, s.store.Now().Truncate(time.Second), last.Late
	}
	if plan.Skipped > 0 {
		s.log.Warn("occurrences missed (not sent within the grace) were skipped", "schedule", sc.Name, "skipped", plan.Skipped)
	}
	return s.write(ctx, sc, r, st)
}

// read reads sc's record, creating it first with the schedule's first
// occurrence after now if there is none (or finding that another instance
// just did), and reading it back.
func (s *Scheduler[T]) read(ctx context.Context, sc *scheduled[T]) (*records.Record, *timetable.State, error) {
	r, err := s.store.Read(ctx, sc.record)
	for try := 0; errors.Is(err, records.ErrMissing) && try < 2; try++ {
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
		occ := Occurrence{Schedule: sc.Name, At: o.At.UTC(), Late: o.Late, Missed: o.Missed}
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
func (s *Scheduler[T]) route(sc *scheduled[T], o timetable.Occurrence, item int) route {
	at := o.At.UTC()
	once := recordName(payload.KindOnce, s.p.target.Name(), fmt.Sprintf("%s\x00%d\x00%d", sc.Name, at.Unix(), item))
	return route{at: at, occ: &dueline.Occurrence{Schedule: sc.Name, At: at.Unix(), Item: item, Late: o.Late, Missed: o.Missed, Once: once}}
}

// messagesFor calls the schedule's Messages, turning a panic into a
// [*PanicError]: the occurrence is tried again, as for an error.
func messagesFor[T any](ctx context.Context, sc *scheduled[T], o Occurrence) (bodies []T, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
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
