package azdispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// elsewhere opens q again through another Account, as another process would:
// sends through it wake no listener of q.
func elsewhere(t testing.TB, q *Queue) *Queue {
	t.Helper()
	other, err := testAccount(t, nil).Queue(q.Name())
	require.NoError(t, err)
	return other
}

// events records a listener's events.
type events struct {
	mu   sync.Mutex
	seen map[EventKind]int
	all  []Event
}

func (e *events) record(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = map[EventKind]int{}
	}
	e.seen[ev.Kind]++
	e.all = append(e.all, ev)
}

// of returns the events of kind k, in order.
func (e *events) of(k EventKind) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

func (e *events) count(k EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[k]
}

// atMaxBackOff is an idle hook that, after the first empty receive, waits an
// hour: a listener that finds anything sooner was woken.
func atMaxBackOff(State, int) (time.Duration, bool) { return time.Hour, false }

func TestListenerScalesUpUnderABacklogAndBackDownWhenIdle(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sendJobs(t, elsewhere(t, q), 200)

	var ev events
	c := newTally()
	cfg := quick()
	cfg.Scaling.BatchSize, cfg.Concurrency = 8, 8 // small dequeuers, so that one cannot keep up
	cfg.Scaling.MaxDequeuers = 4
	cfg.Scaling.ScaleInterval = 100 * time.Millisecond
	cfg.OnEvent = ev.record
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error {
		time.Sleep(20 * time.Millisecond)
		return nil
	}), cfg)
	require.NoError(t, err)
	begin := time.Now()
	stop := started(t, l)

	waitFor(t, "all 200 handled", func() bool { return c.succeeded() == 200 })
	s := l.State()
	took := time.Since(begin) // after the reading: every depth read it counts was made within took
	assert.Equal(t, 4, s.MaxActiveDequeuers, "scaled up to MaxDequeuers")
	assert.Positive(t, s.ScaleUps)
	assert.Positive(t, ev.count(EventScaleUp))
	assert.False(t, s.DepthAt.IsZero(), "the depth was read")
	// Two readers of Get Queue Properties, each at most once per scale
	// interval however long a loaded machine takes: the scaler, and the
	// pause gate before a receive (a scaler's read refreshes the gate, but
	// a gate's read does not stand in for the scaler's, so both may fall in
	// one interval); and the few of a start (the service's clock, the
	// queue's pause). Fewer than the receives.
	perReader := int64(took/cfg.Scaling.ScaleInterval) + 1
	assert.LessOrEqual(t, s.Transactions.Depth, 2*perReader+5, "depth reads are rationed to one per scale interval and reader, in %v", took)
	assert.Less(t, s.Transactions.Depth, s.Transactions.Receive, "depth reads are rationed, not one per batch")

	waitFor(t, "back down to one dequeuer", func() bool { return l.State().ActiveDequeuers == 1 })
	s = l.State()
	assert.Equal(t, int64(3), s.ScaleDowns)
	assert.Equal(t, 3, ev.count(EventScaleDown))
	assert.Positive(t, ev.count(EventIdle))
	require.NoError(t, stop())
	c.assertEachSucceededOnce(t, 200, l.State().Lost)
	assertSettled(t, l.State())
}

func TestListenerNeverGoesBelowMinDequeuers(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	cfg := quick()
	cfg.Scaling.MinDequeuers, cfg.Scaling.MaxDequeuers = 3, 5
	l, err := NewListener(q, func(context.Context, *Message[job]) error { return nil }, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "three idle dequeuers well past the cap", func() bool {
		s := l.State()
		return s.ActiveDequeuers == 3 && s.EmptyReceives >= 60
	})
	assert.Equal(t, 3, l.State().MaxActiveDequeuers)
	assert.Zero(t, l.State().ScaleDowns)
	require.NoError(t, stop())
}

// backedOffListener runs a listener on a fresh queue and returns once it is
// backing off for an hour after an empty receive.
func backedOffListener(t *testing.T) (*Queue, *tally, *Listener[job], func() error) {
	t.Helper()
	q := testQueue(t)
	c := newTally()
	cfg := quick()
	cfg.Scaling.Idle = atMaxBackOff
	l, err := NewListener(q, c.handler(nil), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "backing off", func() bool { return l.State().IdleDequeuers == 1 })
	return q, c, l, stop
}

func TestNotifyWakesAListenerAtMaximumBackOff(t *testing.T) {
	t.Parallel()
	q, c, l, stop := backedOffListener(t)

	sendJobs(t, elsewhere(t, q), 1) // no wake-up: another process sent it
	l.Notify()
	waitFor(t, "the job handled long before the back-off ends", func() bool { return c.succeeded() == 1 })
	assert.Equal(t, int64(1), l.State().Wakes)
	require.NoError(t, stop())
	assertSettled(t, l.State())
}

func TestASendInTheSameProcessWakesTheListener(t *testing.T) {
	t.Parallel()
	q, c, l, stop := backedOffListener(t)

	sendJobs(t, q, 3) // through the listener's own *Queue
	waitFor(t, "the jobs handled without an explicit Notify", func() bool { return c.succeeded() == 3 })
	assert.GreaterOrEqual(t, l.State().Wakes, int64(1))

	p, err := NewPublisher[job](q, nil)
	require.NoError(t, err)
	wakes := l.State().Wakes
	_, err = p.SendAfter(context.Background(), job{N: 3}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, wakes, l.State().Wakes, "a delayed message wakes nobody: it is not there yet")
	l.Notify() // the delayed message becomes visible while this wait is at the hour-long cap
	require.NoError(t, stop())
}

func TestPushOnlyListenerIdlesWithNoDequeuerAndWakesOnSend(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	c := newTally()
	cfg := quick()
	cfg.Scaling.PushOnly, cfg.Scaling.Wake = true, q
	cfg.Scaling.ScaleInterval = 50 * time.Millisecond
	l, err := NewListener(q, c.handler(nil), cfg)
	require.NoError(t, err)
	stop := started(t, l)

	waitFor(t, "no dequeuer left", func() bool {
		s := l.State()
		return s.ScaleDowns == 1 && s.ActiveDequeuers == 0
	})
	idle := l.State().Transactions.Total()
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, idle, l.State().Transactions.Total(), "an idle push-only listener makes no request")

	for round := range 3 {
		downs := l.State().ScaleDowns
		sendJobRange(t, q, 40*round, 40*(round+1)) // through the same *Queue: each send wakes it
		waitFor(t, "all handled", func() bool { return c.succeeded() == 40*(round+1) })
		waitFor(t, "idle again, with no dequeuer", func() bool {
			s := l.State()
			return s.ScaleDowns > downs && s.ActiveDequeuers == 0
		})
	}
	sendJobRange(t, elsewhere(t, q), 120, 125)
	l.Notify()
	waitFor(t, "a Notify after a send elsewhere", func() bool { return c.succeeded() == 125 })
	require.NoError(t, stop())
	c.assertEachSucceededOnce(t, 125, l.State().Lost)
	assert.Zero(t, depth(t, q))
	assertSettled(t, l.State())
}
