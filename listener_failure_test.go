package azdispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chaosTransport misbehaves like a throttled or flaky account: it answers
// some requests with 503 ServerBusy without passing them on, and for others
// lets the service act but loses the response, so the client times out not
// knowing the outcome (a delete done, a receive that hid messages, an update
// that changed the pop receipt).
type chaosTransport struct {
	next               policy.Transporter
	busy, lostResponse float64
	mu                 sync.Mutex
	rng                *rand.Rand
	busyHits, lostHits int
	enabled            bool
}

func (c *chaosTransport) roll() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.enabled {
		return 1
	}
	return c.rng.Float64()
}

func (c *chaosTransport) Do(req *http.Request) (*http.Response, error) {
	r := c.roll()
	if r < c.busy {
		c.mu.Lock()
		c.busyHits++
		c.mu.Unlock()
		return serverBusy(req), nil
	}
	resp, err := c.next.Do(req)
	if r < c.busy+c.lostResponse && err == nil {
		c.mu.Lock()
		c.lostHits++
		c.mu.Unlock()
		resp.Body.Close()
		<-req.Context().Done() // the SDK's per-try timeout
		return nil, req.Context().Err()
	}
	return resp, err
}

func (c *chaosTransport) set(enabled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enabled = enabled
}

func TestListenerLosesNothingThroughServerBusyAndLostResponses(t *testing.T) {
	t.Parallel()
	chaos := &chaosTransport{next: newHTTPClient(), busy: 0.15, lostResponse: 0.05, rng: rand.New(rand.NewPCG(1, 2))}
	acct := testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: chaos,
		Retry: policy.RetryOptions{
			MaxRetries: 1, TryTimeout: 300 * time.Millisecond,
			RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond,
		},
	}}})
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	// The jobs are sent, and the queue watched, through an account without
	// the chaos and its short try timeout: a loaded machine may take longer
	// than 300 ms to answer a send, which is no fault of the listener's.
	clean := testAccount(t, nil)
	observer, err := clean.Queue(q.Name())
	require.NoError(t, err)
	const n = 150
	sendJobs(t, observer, n)
	chaos.set(true)

	cfg := quick()
	cfg.VisibilityTimeout = 2 * time.Second // what a lost receive hid comes back soon
	cfg.MaxDequeueCount = 50                // redeliveries caused by chaos must not poison
	c := newTally()
	var mu sync.Mutex
	failedOnce := map[int]bool{}
	l, err := NewListener(q, c.handler(func(_ context.Context, m *Message[job]) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Body.N%10 == 0 && !failedOnce[m.Body.N] { // some handler failures too
			failedOnce[m.Body.N] = true
			return errors.New("transient")
		}
		return nil
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "every job succeeded", func() bool { return c.succeeded() == n })
	waitFor(t, "the queue emptied", func() bool { return depth(t, observer) == 0 })
	require.NoError(t, stop())
	assertSettled(t, l.State())

	s := l.State()
	c.assertEachSucceededOnce(t, n, s.Lost)
	chaos.mu.Lock()
	t.Logf("503s injected: %d, responses lost: %d; state: %+v", chaos.busyHits, chaos.lostHits, s)
	assert.Positive(t, chaos.busyHits)
	assert.Positive(t, chaos.lostHits)
	chaos.mu.Unlock()
	assert.Zero(t, s.Poisoned)
	assert.Equal(t, 0, depth(t, observer.poisonQueue()))
}

func TestTwoListenersShareAQueueWithoutDuplicates(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	const n = 300
	sendJobs(t, q, n)

	c := newTally()
	h := c.handler(func(_ context.Context, m *Message[job]) error {
		if m.Body.N%7 == 0 && m.DequeueCount == 1 {
			return errors.New("first try fails")
		}
		return nil
	})
	cfg := quick()
	cfg.Concurrency = 8 // small, so both listeners get work
	a, err := NewListener(q, h, cfg)
	require.NoError(t, err)
	b, err := NewListener(q, h, cfg)
	require.NoError(t, err)
	stopA, stopB := started(t, a), started(t, b)
	waitFor(t, "all handled", func() bool { return a.State().Succeeded+b.State().Succeeded == n })
	require.NoError(t, stopA())
	require.NoError(t, stopB())
	assertSettled(t, a.State())
	assertSettled(t, b.State())

	c.assertEachSucceededOnce(t, n, 0)
	assert.Zero(t, a.State().Lost+b.State().Lost)
	assert.Positive(t, a.State().Succeeded)
	assert.Positive(t, b.State().Succeeded)
	assert.Equal(t, 0, depth(t, q))
}
