package azdispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// job is the message type of the listener tests.
type job struct {
	N int `json:"n"`
}

// quick returns a config for tests: short idle back-off and retry delay,
// so that tests finish in seconds.
func quick() *ListenerOptions {
	return &ListenerOptions{
		Scaling: ScalingOptions{
			Idle: ExponentialIdle(0, 200*time.Millisecond),
		},
		Retry: func(int64) time.Duration { return time.Second },
	}
}

// started runs l until the returned stop is called (or the test ends) and
// returns Run's result from stop.
func started[T any](t testing.TB, l *Listener[T]) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- l.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-result:
			case <-time.After(2 * time.Minute):
				t.Errorf("Run did not return")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// sendJobs publishes jobs 0..n-1 to q (a Queue or a ShardedQueue).
func sendJobs(t testing.TB, q Target, n int) { sendJobRange(t, q, 0, n) }

// sendJobRange publishes jobs from..to-1 to q.
func sendJobRange(t testing.TB, q Target, from, to int) {
	t.Helper()
	p, err := NewPublisher[job](q, nil)
	require.NoError(t, err)
	for i := from; i < to; i++ {
		_, err := p.Send(context.Background(), job{N: i})
		require.NoError(t, err)
	}
}

// tally counts handler calls and successes per job.
type tally struct {
	mu    sync.Mutex
	calls map[int]int
	ok    map[int]int
}

func newTally() *tally { return &tally{calls: map[int]int{}, ok: map[int]int{}} }

// handler wraps h so that every call and every success is counted; a nil h
// succeeds at once.
func (c *tally) handler(h Handler[job]) Handler[job] {
	if h == nil {
		h = func(context.Context, *Message[job]) error { return nil }
	}
	return func(ctx context.Context, m *Message[job]) error {
		c.mu.Lock()
		c.calls[m.Body.N]++
		c.mu.Unlock()
		err := h(ctx, m)
		if err == nil {
			c.mu.Lock()
			c.ok[m.Body.N]++
			c.mu.Unlock()
		}
		return err
	}
}

func (c *tally) succeeded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ok)
}

func (c *tally) callsOf(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[n]
}

// assertEachSucceededOnce checks that every job 0..n-1 succeeded, and that
// no job was handled again after a success unless the listener reported
// losing a message (a delete that failed), which at-least-once allows.
func (c *tally) assertEachSucceededOnce(t testing.TB, n int, lost int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	extra := 0
	for i := range n {
		if !assert.GreaterOrEqual(t, c.ok[i], 1, "job %d never succeeded", i) {
			continue
		}
		extra += c.ok[i] - 1
	}
	assert.Len(t, c.ok, n, "only jobs that were sent succeeded")
	assert.LessOrEqual(t, int64(extra), lost, "a job succeeded twice without a lost delete")
}

// waitFor polls cond until it holds; storage tests wait on outcomes, never on times.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 60*time.Second, 20*time.Millisecond, what)
}

// depth reads q's depth, failing the test on error.
func depth(t testing.TB, q *Queue) int {
	t.Helper()
	n, err := q.Depth(context.Background())
	require.NoError(t, err)
	return n
}

// poisonedOnce runs l until it has poisoned one message, stops it, checks
// its bookkeeping, and returns the one envelope then in q's poison queue.
func poisonedOnce[T any](t testing.TB, q *Queue, l *Listener[T]) *PoisonEnvelope {
	t.Helper()
	stop := started(t, l)
	waitFor(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	require.NoError(t, stop())
	assertSettled(t, l.State())
	envs := poisonEnvelopes(t, q)
	require.Len(t, envs, 1)
	return envs[0]
}

// poisonEnvelopes drains q's poison queue and returns its envelopes.
func poisonEnvelopes(t testing.TB, q *Queue) []*PoisonEnvelope {
	t.Helper()
	var out []*PoisonEnvelope
	for {
		batch, err := q.PoisonQueue().Receive(context.Background(), MaxBatch, 30*time.Second)
		require.NoError(t, err)
		if len(batch) == 0 {
			return out
		}
		for _, d := range batch {
			env, err := ParsePoison(d.Text)
			require.NoError(t, err)
			out = append(out, env)
			require.NoError(t, q.PoisonQueue().Delete(context.Background(), d))
		}
	}
}

// assertSettled checks the bookkeeping once a listener has stopped: every
// received message is counted in exactly one final outcome.
func assertSettled(t testing.TB, s State) {
	t.Helper()
	assert.Equal(t, s.Received, s.Succeeded+s.Retried+s.Poisoned+s.Lost+s.Released,
		"received = succeeded + retried + poisoned + lost + released: %+v", s)
	assert.Zero(t, s.InFlight)
	assert.Zero(t, s.ActiveDequeuers)
}

// waitsForCancel returns a handler that signals entered on its first call,
// blocks until its context ends, and reports the context's cause.
func waitsForCancel() (h Handler[job], entered <-chan struct{}, cause <-chan error) {
	in, out := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	h = func(ctx context.Context, _ *Message[job]) error {
		once.Do(func() { close(in) })
		<-ctx.Done()
		out <- context.Cause(ctx)
		return ctx.Err()
	}
	return h, in, out
}

// peak counts the handler calls running at once and the most there were.
type peak struct{ running, most atomic.Int64 }

// sleeping returns a handler that takes d, counted in p.
func (p *peak) sleeping(d time.Duration) Handler[job] {
	return func(context.Context, *Message[job]) error {
		now := p.running.Add(1)
		defer p.running.Add(-1)
		for old := p.most.Load(); now > old && !p.most.CompareAndSwap(old, now); old = p.most.Load() {
		}
		time.Sleep(d)
		return nil
	}
}
