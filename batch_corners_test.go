package azdispatch

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/cputime"
)

// A batch item that runs past HandlerTimeout times out alone: the items
// beside it and after it run to their end, and on the batch's last try the
// item is poisoned on its own while the rest of the batch is done. (The
// item's timeout used to end the whole try: the items after it were cut off
// on every delivery, and the whole batch was poisoned with it.)
func TestASlowBatchItemTimesOutAlone(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sent := sendBatch(t, q, 3, nil)
	var mu sync.Mutex
	calls := map[int]int{}
	done := map[int]int{}
	cfg := quick()
	// Two handlers at once: items 0 and 1 start together, item 2 once
	// item 1 is done, and it is still running when item 0 times out.
	cfg.Scaling.MaxDequeuers, cfg.Concurrency = 1, 2
	cfg.HandlerTimeout = time.Second
	cfg.MaxDequeueCount = 2
	cfg.Retry = func(int64) time.Duration { return 0 }
	l, err := NewListener(q, func(ctx context.Context, m *Message[job]) error {
		mu.Lock()
		calls[m.Body.N]++
		mu.Unlock()
		switch m.Body.N {
		case 0: // hangs until its own call times out
			<-ctx.Done()
			return ctx.Err()
		case 1:
			time.Sleep(600 * time.Millisecond)
		case 2:
			// Past item 0's timeout, within its own.
			select {
			case <-time.After(800 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		mu.Lock()
		done[m.Body.N]++
		mu.Unlock()
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "the batch settled", func() bool { s := l.State(); return s.Succeeded+s.Poisoned == 1 })
	require.NoError(t, stop())
	s := l.State()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[int]int{1: 1, 2: 1}, done, "items 1 and 2 each done once")
	assert.Equal(t, 1, calls[2], "item 2 was not cut off by item 0's timeout")
	assert.Equal(t, 2, calls[0], "item 0 tried on each of the batch's two deliveries")
	assertPoisonedAlone(t, q, s, sent.BatchID, 0, "timed out")
}

// assertPoisonedAlone checks that item of the batch batchID was poisoned
// alone, for reason, and that its batch was done and deleted.
func assertPoisonedAlone(t *testing.T, q *Queue, s State, batchID string, item int, reason string) {
	t.Helper()
	assert.EqualValues(t, 1, s.ItemsPoisoned, "item %d poisoned alone", item)
	assert.EqualValues(t, 1, s.Succeeded, "the batch message is done and deleted")
	assert.Zero(t, s.Poisoned, "the batch message itself is not poisoned")
	envs := poisonEnvelopes(t, q)
	require.Len(t, envs, 1)
	assert.Equal(t, batchID, envs[0].Batch)
	assert.Equal(t, item, envs[0].Item)
	assert.Contains(t, envs[0].Reason, reason)
}

// A batch item that times out and then ignores its cancelled context is
// abandoned a grace period later: the batch goes on without it, the items
// beside it and after it run to their end, and on the batch's last try it
// alone is poisoned, while its handler is still running. (Its hang once
// ended the batch's whole try: the items running beside it were cut off
// and poisoned with it, and those after it never ran.)
func TestABatchGoesOnWithoutAnItemThatIgnoresItsTimeout(t *testing.T) {
	long(t)
	t.Parallel()
	q := testQueue(t)
	sent := sendBatch(t, q, 8, nil)
	cfg := quick()
	// Item 0 holds one handler token throughout; items 1 to 7 take turns
	// on the other, for 3.5 s: item 0 is abandoned at 2 s, in their midst.
	cfg.Scaling.MaxDequeuers, cfg.Concurrency = 1, 2
	cfg.HandlerTimeout = time.Second
	cfg.MaxDequeueCount = 1 // the first delivery is the last try
	var mu sync.Mutex
	calls := map[int]int{}
	var hungReturned atomic.Bool
	l, err := NewListener(q, func(ctx context.Context, m *Message[job]) error {
		mu.Lock()
		calls[m.Body.N]++
		mu.Unlock()
		if m.Body.N == 0 { // ignores its context well past its timeout and the grace
			time.Sleep(10 * time.Second)
			hungReturned.Store(true)
			return nil
		}
		time.Sleep(500 * time.Millisecond)
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "the batch settled", func() bool { s := l.State(); return s.Succeeded+s.Poisoned == 1 })
	assert.False(t, hungReturned.Load(), "settled without waiting for item 0")
	s := l.State()
	mu.Lock()
	assert.Equal(t, map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1}, calls, "every item called once")
	mu.Unlock()
	assert.EqualValues(t, 1, s.Failed, "only item 0 failed")
	assert.EqualValues(t, 7, s.ItemsSucceeded)
	assertPoisonedAlone(t, q, s, sent.BatchID, 0, "did not return")
	require.NoError(t, stop()) // waits for item 0's handler
	assert.True(t, hungReturned.Load())
}

// aloneChildEnv names the test that a process of its own runs, for
// measurements that the package's other tests would disturb.
const aloneChildEnv = "AZDISPATCH_ALONE_CHILD"

// runAlone runs test in a new process of the test binary, alone, and
// fails t if it fails; the lines of its output that contain marker are
// logged. It returns true in that process itself, where the caller then
// does the measuring.
func runAlone(t *testing.T, test, marker string) (inChild bool) {
	if os.Getenv(aloneChildEnv) == test {
		return true
	}
	connectionString(t) // the emulator, shared with the child through the environment
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), aloneChildEnv+"="+test)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, marker) {
			t.Log(strings.TrimSpace(line))
		}
	}
	require.NoError(t, err, "the measuring process failed:\n%s", out)
	return false
}

// A message waiting for a handler token blocks: it costs no CPU. Item 3 of
// a batch waits while items 1 and 2 hold the listener's only two tokens;
// the process then uses under 5 % of a core. (The wait used to spin: a
// full core for as long as the item waited.)
func TestAWaitForAHandlerTokenCostsNoCPU(t *testing.T) {
	long(t)
	if !runAlone(t, "TestAWaitForAHandlerTokenCostsNoCPU", "CPU while") {
		return
	}
	q := testQueue(t)
	sendBatch(t, q, 3, nil)
	release := make(chan struct{})
	var entered atomic.Int64
	cfg := quick()
	cfg.Scaling.MaxDequeuers, cfg.Concurrency = 1, 2 // two handler tokens
	l, err := NewListener(q, func(ctx context.Context, m *Message[job]) error {
		entered.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "two items running", func() bool { return entered.Load() == 2 })
	time.Sleep(200 * time.Millisecond) // the idle dequeuer settles into its back-off
	const window = 2 * time.Second
	before, err := cputime.Self()
	require.NoError(t, err)
	time.Sleep(window)
	after, err := cputime.Self()
	require.NoError(t, err)
	share := float64(after-before) / float64(window)
	fmt.Printf("CPU while an item waits for a handler token: %.1f%% of a core over %v\n", 100*share, window)
	assert.EqualValues(t, 2, entered.Load(), "the third item is still waiting")
	close(release)
	waitFor(t, "the batch done", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.Less(t, share, 0.05, "a waiting item must not spin")
}

// Against Azurite: deletes answered 503 ServerBusy for 20 s, each retried
// by the SDK for several seconds (longer than the 2 s visibility timeout),
// as a throttled account would. Every message comes back while its delete
// is still being tried, and is only deleted: each handler runs once.
func TestDeletesThrottledForTwentySecondsRunEachHandlerOnce(t *testing.T) {
	long(t)
	t.Parallel()
	const n, failFor = 50, 20 * time.Second
	var until atomic.Int64
	f := &faultTransport{fail: func(req *http.Request) bool {
		return req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/messages/") &&
			time.Now().UnixNano() < until.Load()
	}}
	f.next = newHTTPClient()
	acct := testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: f,
		Retry:     policy.RetryOptions{MaxRetries: 3, RetryDelay: time.Second, MaxRetryDelay: 3 * time.Second},
	}}})
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))
	sendJobs(t, q, n)
	c := newTally()
	cfg := quick()
	cfg.VisibilityTimeout, cfg.MaxDequeueCount = 2*time.Second, 3
	l, err := NewListener(q, c.handler(nil), cfg)
	require.NoError(t, err)
	until.Store(time.Now().Add(failFor).UnixNano())
	stop := started(t, l)
	require.Eventually(t, func() bool { return l.State().Succeeded == n }, failFor+2*time.Minute, 50*time.Millisecond)
	require.NoError(t, stop())
	s := l.State()
	t.Logf("%d messages; %d delete attempts refused; %d deliveries lost to failed deletes, %d deleted as handled before",
		n, f.hits.Load(), s.Lost, s.HandledBefore)
	c.assertEachSucceededOnce(t, n, 0)
	assert.Zero(t, s.Poisoned)
	assert.Positive(t, s.HandledBefore, "messages came back while their deletes failed")
}
