package sourcetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// listenerTests are the outcomes RunListener checks, one subtest each.
var listenerTests = []suiteTest{
	{"ListenerDeletesWhenHandlerSucceeds", testListenerSuccess, false},
	{"ListenerRetriesAFailedHandler", testListenerRetry, false},
	{"ListenerPoisonsAfterMaxDequeueCount", testListenerPoisonAfterTries, false},
	{"ListenerPoisonsPermanentAtOnce", testListenerPermanent, false},
	{"ListenerRecoversAPanicAndRetries", testListenerPanic, false},
	{"ListenerTimesOutAHandlerAndRetries", testListenerTimeout, false},
	{"ListenerPoisonsUndecodableTextUnhandled", testListenerUndecodable, false},
}

// RunListener checks an [azdispatch.Listener]'s outcomes end to end over h's
// queues: what becomes of a message after each kind of handler result. Every
// outcome is a parallel subtest on a queue of its own. The queues need a
// poison queue beside them (a PoisonQueue method), which a Listener uses by
// default.
func RunListener(t *testing.T, h Harness) { runAll(t, h, listenerTests) }

// job is the listener tests' message type; its text is JSON, the default codec.
type job struct {
	N int `json:"n"`
}

const jobText = `{"n":7}`

// errFailed is what the handlers return to fail on purpose.
var errFailed = errors.New("sourcetest: handler failed on purpose")

// call is what a handler saw on one call.
type call struct {
	id      string
	dequeue int64
	body    job
	cause   error // the context's cause when the handler returned, if it had ended
}

// handled records a handler's calls and runs step(n) on the n-th (from 1).
type handled struct {
	mu    sync.Mutex
	calls []call
}

func (c *handled) handler(step func(ctx context.Context, n int) error) azdispatch.Handler[job] {
	return func(ctx context.Context, m *azdispatch.Message[job]) error {
		c.mu.Lock()
		n := len(c.calls) + 1
		c.calls = append(c.calls, call{id: m.ID, dequeue: m.DequeueCount, body: m.Body})
		c.mu.Unlock()
		err := step(ctx, n)
		c.mu.Lock()
		c.calls[n-1].cause = context.Cause(ctx)
		c.mu.Unlock()
		return err
	}
}

func (c *handled) all() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.calls...)
}

// options are the listener tests' options: a retry releases a message at
// once (no waiting on any backend), and an idle listener polls often.
func options() *azdispatch.ListenerOptions {
	return &azdispatch.ListenerOptions{
		Retry: func(int64) time.Duration { return 0 },
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond),
		},
	}
}

// runUntil runs a listener on q until done(State) holds, then stops it and
// returns its final State once Run has returned.
func runUntil(t *testing.T, q azdispatch.Shard, h azdispatch.Handler[job], opts *azdispatch.ListenerOptions, what string, done func(azdispatch.State) bool) azdispatch.State {
	t.Helper()
	l, err := azdispatch.NewListener(q, h, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- l.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-result:
			assert.NoError(t, err, "Run")
		case <-time.After(2 * patience):
			t.Errorf("Run did not return")
		}
	}
	stopped := false
	defer func() {
		if !stopped { // the wait failed: Run must still have returned
			stop()
		}
	}()
	require.Eventually(t, func() bool { return done(l.State()) }, patience, poll, what)
	stop()
	stopped = true
	s := l.State()
	assert.Equal(t, s.Received, s.Succeeded+s.Retried+s.Poisoned+s.Lost+s.Released,
		"every received message settled in one outcome: %+v", s)
	assert.Zero(t, s.InFlight, "nothing in flight once Run has returned")
	return s
}

// poisoned returns the one envelope in q's poison queue.
func poisoned(t *testing.T, q azdispatch.Shard) *azdispatch.PoisonEnvelope {
	t.Helper()
	poison := azdispatch.CapabilitiesOf(q).PoisonQueue
	require.NotNil(t, poison, "RunListener needs queues with a poison queue beside them (a PoisonQueue method)")
	p := poison()
	require.NotNil(t, p, "RunListener needs queues with a poison queue beside them")
	d := receiveOne(t, p, long)
	env, err := azdispatch.ParsePoison(d.Text)
	require.NoError(t, err)
	require.NoError(t, p.Delete(context.Background(), d))
	return env
}

// assertEnvelope checks what every poison envelope of the tests says: where
// the message came from, its ID and text, its dequeue count, and why.
func assertEnvelope(t *testing.T, env *azdispatch.PoisonEnvelope, q azdispatch.Shard, id, text string, dequeue int64, reason ...string) {
	t.Helper()
	assert.Equal(t, q.Name(), env.Queue, "the source it came from")
	assert.Equal(t, id, env.MessageID)
	assert.Equal(t, text, env.Body, "the original text, unchanged")
	assert.Equal(t, dequeue, env.DequeueCount)
	for _, r := range reason {
		assert.Contains(t, env.Reason, r, "the reason says why")
	}
}

// succeeded reports whether n messages succeeded.
func succeeded(n int64) func(azdispatch.State) bool {
	return func(s azdispatch.State) bool { return s.Succeeded >= n }
}

// poisonedN reports whether n messages were poisoned.
func poisonedN(n int64) func(azdispatch.State) bool {
	return func(s azdispatch.State) bool { return s.Poisoned >= n }
}
