package azdispatch

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/cputime"
)

// heldSource is an in-memory Source of n messages that hands each out
// once and never gets them back: a backlog for a scaling test, with no
// storage time and nothing to retry. It is its own poison queue, which no
// test here uses.
type heldSource struct {
	mu      sync.Mutex
	left    int
	next    int
	deleted atomic.Int64
}

func (s *heldSource) Name() string { return "held" }

func (s *heldSource) Receive(_ context.Context, max int, _ time.Duration) ([]*Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := min(max, s.left)
	s.left -= k
	out := make([]*Delivery, k)
	now := time.Now()
	for i := range out {
		s.next++
		id := strconv.Itoa(s.next)
		out[i] = &Delivery{ID: id, Text: `{"n":1}`, DequeueCount: 1, InsertedAt: now, ReceivedAt: now, Receipt: id}
	}
	return out, nil
}

func (s *heldSource) Delete(context.Context, *Delivery) error {
	s.deleted.Add(1)
	return nil
}

func (s *heldSource) SetVisibility(context.Context, *Delivery, time.Duration) error { return nil }

func (s *heldSource) Depth(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left, nil
}

func (s *heldSource) Send(context.Context, string, *SendOptions) (string, error) { return "", nil }

// gaugeReading makes a listener's gauge of its cores read a process that
// uses share of one core, whatever the machine really does: busy or idle,
// the test's outcome must not depend on it. Spans of 20 ms, and a share
// well away from the threshold, keep a goroutine preempted between the
// two reads of a sample from changing the verdict; a span of an hour
// keeps it unknown for the whole test.
func gaugeReading(share float64, span time.Duration) func() *cputime.Gauge {
	return func() *cputime.Gauge {
		start := time.Now()
		read := func() (time.Duration, error) {
			return time.Duration(share * float64(time.Since(start))), nil
		}
		return cputime.NewGaugeWith(read, func() int { return 1 }, time.Now, span)
	}
}

// coresListener is a listener of src whose gauge reads share of its one
// core, with handle as its handler and a record of its scale-ups.
func coresListener(t *testing.T, src *heldSource, share float64, span time.Duration, handle func(context.Context, *Message[map[string]int]) error, opts ListenerOptions) (*Listener[map[string]int], *events) {
	t.Helper()
	var seen events
	opts.OnEvent = seen.record
	opts.PoisonQueue = src
	opts.Scaling.ScaleInterval = time.Millisecond // the depth read after every full receive it may
	l, err := NewListener(src, handle, &opts)
	require.NoError(t, err)
	l.cores = gaugeReading(share, span)
	return l, &seen
}

// A listener whose handlers return at once, in a process that fills its
// core, adds no dequeuer however deep the backlog: another receive loop
// would only share the core. It reads the depth all the same.
func TestAListenerThatFillsItsCoresAddsNoDequeuerForWorkItDoesItself(t *testing.T) {
	t.Parallel()
	const n = 20000
	src := &heldSource{left: n}
	// Slots to spare: a handler that waits for a core now and then
	// holds a few, never enough to make a receive wait for them.
	l, seen := coresListener(t, src, 2, 20*time.Millisecond, func(context.Context, *Message[map[string]int]) error { return nil },
		ListenerOptions{Concurrency: 4096})
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	s := l.State()
	assert.Zero(t, seen.count(EventScaleUp), "scale-ups: %+v", seen.of(EventScaleUp))
	assert.Equal(t, 1, s.MaxActiveDequeuers)
	assert.False(t, s.DepthAt.IsZero(), "the depth was never read")
	assert.EqualValues(t, n, src.deleted.Load())
}

// The same listener with a core to spare scales up on the same backlog:
// what holds it back above is the gauge.
func TestAListenerWithCoresToSpareAddsDequeuers(t *testing.T) {
	t.Parallel()
	const n = 20000
	src := &heldSource{left: n}
	l, seen := coresListener(t, src, 0, 20*time.Millisecond, func(context.Context, *Message[map[string]int]) error { return nil },
		ListenerOptions{Concurrency: 4096})
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
	require.NoError(t, stop())
	assert.Positive(t, seen.count(EventScaleUp), "scale-ups")
	assert.Greater(t, l.State().MaxActiveDequeuers, 1)
}

// Handlers that wait hold their dequeuers back (a receive waits for
// slots), and the listener scales up to its maximum for them however busy
// the process is, and before its cores are first measured: a start on a
// deep queue of slow handlers is not held to one receive loop for a span.
func TestAListenerWhoseHandlersWaitScalesUpHoweverBusyTheProcess(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		span time.Duration // of the gauge: an hour is never measured
	}{{"measured full", 20 * time.Millisecond}, {"not yet measured", time.Hour}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const n = 2000
			src := &heldSource{left: n}
			release := make(chan struct{})
			l, _ := coresListener(t, src, 2, c.span, func(ctx context.Context, _ *Message[map[string]int]) error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}, ListenerOptions{Concurrency: 64, Scaling: ScalingOptions{MaxDequeuers: 4}})
			stop := started(t, l)
			waitFor(t, "scaled to the maximum", func() bool { return l.State().ActiveDequeuers == 4 })
			close(release)
			waitFor(t, "all handled", func() bool { return l.State().Succeeded == n })
			require.NoError(t, stop())
		})
	}
}
