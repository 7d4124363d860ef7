package azdispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// skewedEmulator starts an emulator of its own whose clock is offset from
// this machine's (ahead if positive) from its very first answer: every time
// it reports, the Date header of errors included, is on that clock.
func skewedEmulator(t *testing.T, offset time.Duration) *azurite.Instance {
	t.Helper()
	needStorage(t)
	inst, err := azurite.Start(context.Background(), &azurite.Options{ClockOffset: offset})
	require.NoError(t, err, azurite.HowTo)
	t.Cleanup(func() { _ = inst.Stop() })
	return inst
}

// freshAccount opens inst's account through a client that has made no
// request yet: a process that has not heard the service's time.
func freshAccount(t *testing.T, inst *azurite.Instance) *Account {
	t.Helper()
	a, err := NewAccountFromConnectionString(inst.ConnectionString(), nil)
	require.NoError(t, err)
	return a
}

// skewedQueue creates a queue on inst through a client of its own, and
// returns it opened through a, which has not heard from the service.
func skewedQueue(t *testing.T, inst *azurite.Instance, a *Account) *Queue {
	t.Helper()
	name := uniqueName(t)
	other, err := freshAccount(t, inst).Queue(name)
	require.NoError(t, err)
	require.NoError(t, other.Create(context.Background()))
	q, err := a.Queue(name)
	require.NoError(t, err)
	require.False(t, q.clock.Known(), "the test needs a client that has not heard the service's time")
	return q
}

// handledAt runs a listener on q and reports when, by the local clock, the
// first message was handled.
func handledAt(t *testing.T, q *Queue) <-chan time.Time {
	t.Helper()
	at := make(chan time.Time, 1)
	l, err := NewListener(q, func(context.Context, *Message[job]) error {
		select {
		case at <- time.Now():
		default:
		}
		return nil
	}, quick())
	require.NoError(t, err)
	started(t, l)
	return at
}

// A SendAt from a process whose clock runs ahead of the service's, made
// before any answer: the time is still ahead for the service (it is past
// for this machine), and the message is not handled before it. (It was
// sent visible at once, and handled 1 m 30 s early, while the publisher
// took its own clock for the service's.)
func TestSendAtFromAClockAheadOfTheServiceIsNotEarly(t *testing.T) {
	long(t)
	t.Parallel()
	const offset = -2 * time.Minute // the service's clock, from this machine's
	inst := skewedEmulator(t, offset)
	q := skewedQueue(t, inst, freshAccount(t, inst))
	p, err := NewPublisher[job](q, nil)
	require.NoError(t, err)
	at := time.Now().Add(offset + 8*time.Second).Truncate(time.Second) // 8 s ahead for the service, 112 s past here
	sent, err := p.SendAt(context.Background(), job{N: 1}, at)
	require.NoError(t, err)
	assert.Equal(t, at.UTC(), sent.Due)
	select {
	case h := <-handledAt(t, q):
		service := h.Add(offset)
		assert.False(t, service.Before(at.Add(-500*time.Millisecond)), "handled %v before its time by the service's clock", at.Sub(service))
		assert.Less(t, service.Sub(at), 15*time.Second, "handled soon after its time")
	case <-time.After(time.Minute):
		t.Fatal("not handled within a minute")
	}
}

// A SendAt from a process whose clock runs behind the service's, made
// before any answer: the message is hidden for what remains by the
// service's clock, not by this machine's. (It was hidden for the local
// wait, and handled 2 hours late.)
func TestSendAtFromAClockBehindTheServiceIsNotLate(t *testing.T) {
	long(t)
	t.Parallel()
	const offset = 2 * time.Hour
	inst := skewedEmulator(t, offset)
	q := skewedQueue(t, inst, freshAccount(t, inst))
	p, err := NewPublisher[job](q, nil)
	require.NoError(t, err)
	at := time.Now().Add(offset + 4*time.Second).Truncate(time.Second)
	_, err = p.SendAt(context.Background(), job{N: 1}, at)
	require.NoError(t, err)
	select {
	case h := <-handledAt(t, q):
		service := h.Add(offset)
		assert.False(t, service.Before(at.Add(-500*time.Millisecond)), "handled %v early", at.Sub(service))
	case <-time.After(time.Minute):
		t.Fatal("not handled within a minute: hidden by this machine's clock")
	}
}

// A SendAt further out from a process whose clock runs ahead: its TTL is
// counted from its due time on the service's clock, so it is handled when
// due. (The TTL was counted from the wait this machine's clock gave, an
// hour short, and the message expired an hour before it was due: lost.)
// The emulator's clock is moved past the due time rather than waited for.
func TestSendAtFromAClockAheadLivesItsTTLPastItsDueTime(t *testing.T) {
	long(t)
	t.Parallel()
	const offset = -time.Hour
	inst := skewedEmulator(t, offset)
	q := skewedQueue(t, inst, freshAccount(t, inst))
	p, err := NewPublisher[job](q, &PublisherOptions{TTL: time.Minute})
	require.NoError(t, err)
	at := time.Now().Add(offset + 2*time.Hour).Truncate(time.Second)
	_, err = p.SendAt(context.Background(), job{N: 1}, at)
	require.NoError(t, err)
	handled := handledAt(t, q)
	require.NoError(t, inst.SetClockOffset(offset+2*time.Hour+5*time.Second), "the service's clock past the due time")
	select {
	case <-handled:
	case <-time.After(time.Minute):
		t.Fatalf("not handled when due (depth %d: expired before it was due?)", depth(t, q))
	}
}

// A cancel from a process whose clock runs ahead of the service's, made
// before any answer, judges expiry and the cancel record's life on the
// service's clock: the message is not taken for expired, and the record
// outlives a sweep made before the message is due, so the listener drops
// the message when due. (The cancel said ErrAlreadyDelivered for a message
// still waiting; or it returned nil, its record was swept early, and the
// handler ran.)
func TestCancelFromAClockAheadOfTheService(t *testing.T) {
	long(t)
	t.Parallel()
	const offset = -50 * time.Minute
	inst := skewedEmulator(t, offset)
	ctx := context.Background()
	q, err := freshAccount(t, inst).Queue(uniqueName(t))
	require.NoError(t, err)
	store, err := q.Account().PayloadStore(uniqueName(t))
	require.NoError(t, err)

	// Due in 40 minutes, living 20 more: expired by this machine's clock
	// only an hour from now, though it runs 50 minutes ahead.
	pub, err := NewPublisher[job](q, &PublisherOptions{Payloads: store, TTL: 20 * time.Minute})
	require.NoError(t, err)
	pub.policy.Hop = testHop
	s, err := pub.SendAfter(ctx, job{N: 1}, 40*time.Minute)
	require.NoError(t, err)
	// A short-lived one, expired by this machine's clock, not yet by the
	// service's.
	short, err := pub.SendAfter(ctx, job{N: 2}, 10*time.Second)
	require.NoError(t, err)

	var handled atomic.Int64
	o := quick()
	o.Payloads.Store, o.VisibilityTimeout = store, testHop
	l, err := NewListener(q, func(context.Context, *Message[job]) error { handled.Add(1); return nil }, o)
	require.NoError(t, err)
	l.hop = testHop
	started(t, l)
	waitFor(t, "hidden again by a listener", func() bool { return l.State().Rehidden >= 2 })

	// Another process, its clock 50 minutes ahead, that has not heard
	// the service's time.
	other := publisherThrough(t, freshAccount(t, inst), q.Name(), store.Container())
	require.NoError(t, other.Cancel(ctx, s.Token), "not expired by the service's clock")

	// 11 minutes on: the record must outlive a sweep (its life counted
	// by this machine's clock was 10 minutes).
	require.NoError(t, inst.SetClockOffset(offset+11*time.Minute))
	waitFor(t, "the publisher sees the moved clock", func() bool {
		_, err := q.Depth(ctx)
		return err == nil && q.ServiceTime().After(time.Now().Add(offset+10*time.Minute))
	})
	res, err := Sweep(ctx, store, &SweepOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	assert.Zero(t, res.Deleted, "the cancel record lives as long as its message could")
	waitFor(t, "the short one handled", func() bool { return handled.Load() == 1 })

	// Past its due time: dropped, not handled.
	require.NoError(t, inst.SetClockOffset(offset+41*time.Minute))
	waitFor(t, "found cancelled when due", func() bool { return l.State().Cancelled == 1 })
	assert.Equal(t, int64(1), handled.Load(), "only the short one was handled")
	assert.ErrorIs(t, other.Cancel(ctx, short.Token), ErrAlreadyDelivered)
}

// A new schedule on a service whose clock is far from this machine's: its
// first occurrence is the first after now by the service's clock, taken
// from the answer that found no state (a 404): none before the schedule
// existed is sent as missed (a clock 5 hours behind sent 11 catch-ups),
// and the first is not hours late (a clock 5 hours ahead waited 5 hours).
func TestANewScheduleStartsOnTheServicesClock(t *testing.T) {
	t.Parallel()
	for _, offset := range []time.Duration{5 * time.Hour, -5 * time.Hour} {
		t.Run(offset.String(), func(t *testing.T) {
			t.Parallel()
			inst := skewedEmulator(t, offset)
			a := freshAccount(t, inst)
			q := skewedQueue(t, inst, a)
			p, err := NewPublisher[string](q, nil)
			require.NoError(t, err)
			s, err := NewScheduler(p, &SchedulerOptions{Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			require.NoError(t, s.Add(Schedule[string]{Name: "hourly", Every: time.Hour, Misfire: MisfireEach,
				Messages: func(context.Context, Occurrence) ([]string, error) { return []string{"tick"}, nil }}))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			var states []ScheduleState
			waitFor(t, "the schedule's state", func() bool {
				states, err = s.States(context.Background())
				return err == nil && len(states) == 1
			})
			time.Sleep(time.Second) // time for catch-ups, if any were taken for due
			cancel()
			require.NoError(t, <-done)
			states, err = s.States(context.Background())
			require.NoError(t, err)
			require.Len(t, states, 1)
			now := time.Now().Add(offset)
			assert.Zero(t, states[0].Sent, "no occurrence before the schedule existed was sent")
			assert.True(t, states[0].Next.After(now.Add(-time.Second)), "next %v, service now %v", states[0].Next, now)
			assert.LessOrEqual(t, states[0].Next.Sub(now), time.Hour, "the first is within the hour by the service's clock")
			assert.Zero(t, depth(t, q))
		})
	}
}

// The clock of an account is set by every answer, errors included: a 404
// and a 403 tell the service's time as well as a success.
func TestEveryAnswerTellsTheServicesTime(t *testing.T) {
	long(t)
	t.Parallel()
	const offset = 3 * time.Hour
	inst := skewedEmulator(t, offset)
	a := freshAccount(t, inst)
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = q.Receive(context.Background(), 1, time.Second)
	require.True(t, isQueueNotFound(err), "%v", err)
	require.True(t, q.clock.Known(), "a 404 tells the time")
	assert.WithinDuration(t, time.Now().Add(offset), q.ServiceTime(), 2*time.Second)

	bad, err := NewAccountWithSharedKey(inst.QueueEndpoint(), "devstoreaccount1", "QUJDRA==", nil)
	require.NoError(t, err)
	bq, err := bad.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = bq.Depth(context.Background())
	var se *StorageError
	require.True(t, errors.As(err, &se) && se.StatusCode == 403, "%v", err)
	assert.True(t, bq.clock.Known(), "a 403 tells the time")
	assert.WithinDuration(t, time.Now().Add(offset), bq.ServiceTime(), 2*time.Second)

	store, err := a.PayloadStore(uniqueName(t))
	require.NoError(t, err)
	assert.True(t, store.records.Known(), "the blob service shares the account's clock")
}

// A cancel of a message that never expires, made longer after its due
// time than the record of its delivery is kept (and after a sweep removed
// that record), cannot tell whether it was delivered, and says so. (It
// wrote a new record and returned nil, for a message whose handler had
// run.) One never received is still deleted by its send's receipt.
func TestACancelLongAfterADeliveryCannotTell(t *testing.T) {
	long(t)
	t.Parallel()
	inst := skewedEmulator(t, time.Nanosecond) // the real time, and a clock to move
	ctx := context.Background()
	a := freshAccount(t, inst)
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	store, err := a.PayloadStore(uniqueName(t))
	require.NoError(t, err)
	pub, err := NewPublisher[job](q, &PublisherOptions{Payloads: store, TTL: -1})
	require.NoError(t, err)
	pub.policy.Hop = testHop
	delivered, err := pub.SendAfter(ctx, job{N: 1}, 3*time.Second)
	require.NoError(t, err)

	var handled atomic.Int64
	o := quick()
	o.Payloads.Store, o.VisibilityTimeout = store, testHop
	l, err := NewListener(q, func(context.Context, *Message[job]) error { handled.Add(1); return nil }, o)
	require.NoError(t, err)
	l.hop = testHop
	stop := started(t, l)
	waitFor(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.ErrorIs(t, pub.Cancel(ctx, delivered.Token), ErrAlreadyDelivered, "its record says so")

	// Never received: no listener runs from here.
	waiting, err := pub.SendAfter(ctx, job{N: 2}, 3*time.Second)
	require.NoError(t, err)

	// 31 days on, and a sweep: the delivered record is gone.
	require.NoError(t, inst.SetClockOffset(31*24*time.Hour))
	waitFor(t, "the publisher sees the moved clock", func() bool {
		_, err := q.Depth(ctx)
		return err == nil && q.ServiceTime().After(time.Now().Add(30*24*time.Hour))
	})
	res, err := Sweep(ctx, store, &SweepOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Equal(t, 1, res.Deleted, "the delivered record, after its 30 days")

	err = pub.Cancel(ctx, delivered.Token)
	assert.ErrorIs(t, err, ErrCancelUndetermined)
	assert.ErrorIs(t, pub.Cancel(ctx, delivered.Token), ErrCancelUndetermined, "a second cancel says the same")
	assert.Equal(t, int64(1), handled.Load())

	require.NoError(t, pub.Cancel(ctx, waiting.Token), "never received: its send's receipt still deletes it")
	assert.Zero(t, depth(t, q))
}
