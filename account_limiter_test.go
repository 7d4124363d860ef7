package azdispatch

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// TestAccountLimiterPacesEveryAttempt checks, against Azurite, that an
// account's limiter spaces its HTTP attempts, that retries take turns, and
// that a request whose context ends while it waits is neither sent nor
// counted.
func TestAccountLimiterPacesEveryAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var sent []time.Time
	var failures atomic32
	f := &faultTransport{fail: func(r *http.Request) bool {
		mu.Lock()
		sent = append(sent, time.Now())
		mu.Unlock()
		return r.Method == http.MethodGet && failures.dec()
	}}
	f.next = newHTTPClient()
	const perSecond = 20 // a burst of 2, then one request each 50 ms
	opts := faultyAccountOptions(f, 3)
	opts.Limiter = rate.NewLimiter(perSecond, 2)
	acct := testAccount(t, opts)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	start := time.Now() // no turn is taken before this
	require.NoError(t, q.Create(ctx))
	for range 6 {
		_, err := q.Send(ctx, "paced", nil)
		require.NoError(t, err)
	}
	failures.set(2)
	batch, err := q.Receive(ctx, 32, time.Minute) // two 503s, then the answer
	require.NoError(t, err)
	assert.Len(t, batch, 6)

	// The retries went at once, but took turns: the next request waits
	// for the eleventh.
	_, err = q.Send(ctx, "after the retries", nil)
	require.NoError(t, err)

	mu.Lock()
	n := len(sent)
	span := sent[n-1].Sub(start)
	mu.Unlock()
	assert.Equal(t, 11, n, "a create, six sends, three receive attempts, a send")
	assert.EqualValues(t, n, acct.Transactions().Total())
	// A lower bound only: the limiter guarantees the spacing (the last of 11
	// turns after a burst of 2 goes 9 intervals after the first asked); how
	// much later the requests went depends on the machine.
	assert.GreaterOrEqual(t, span, time.Duration(n-2)*time.Second/perSecond, "11 turns after a burst of 2")

	// With ten turns taken, the next is at least 400 ms away: a context
	// that ends first gets its error back, and the request is not sent.
	for range 10 {
		opts.Limiter.Reserve()
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_, err = q.Send(waitCtx, "never sent", nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualValues(t, n, acct.Transactions().Total(), "not counted")
	mu.Lock()
	assert.Len(t, sent, n, "not sent")
	mu.Unlock()
}

// TestLimiterWaitIsNotPartOfTheTryTimeout checks that a request waiting for
// its turn does not spend the SDK's per-attempt timeout: it is sent when its
// turn comes (here to meet an injected 503), not failed as a timeout, which
// would look like an unreachable endpoint.
func TestLimiterWaitIsNotPartOfTheTryTimeout(t *testing.T) {
	t.Parallel()
	f := &faultTransport{fail: func(*http.Request) bool { return true }}
	f.next = newHTTPClient()
	opts := faultyAccountOptions(f, 2)
	opts.Client.Retry.TryTimeout = 100 * time.Millisecond
	opts.Limiter = rate.NewLimiter(4, 1) // a turn each 250 ms
	q, err := testAccount(t, opts).Queue(uniqueName(t))
	require.NoError(t, err)
	for i := range 2 { // the second waits for the fourth turn, 750 ms on
		_, err := q.Send(context.Background(), "x", nil)
		var se *StorageError
		require.ErrorAs(t, err, &se, "request %d", i)
		assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode, "request %d was sent: %v", i, err)
	}
	assert.EqualValues(t, 6, f.hits.Load(), "each call: an attempt and two retries")
}

// A request whose turn under the account's limiter would come after its
// deadline fails at once with context.DeadlineExceeded, and a sharded
// queue does not take that for its shards' fault: no request was sent, and
// a back-off would only move the caller's own deadline onto the shards.
func TestALimiterDeadlineIsNotTheShardsFault(t *testing.T) {
	limiter := rate.NewLimiter(1, 1)
	for range 100 {
		limiter.Reserve()
	}
	acct, err := NewAccountWithSharedKey("http://127.0.0.1:9/devstoreaccount1", "devstoreaccount1", emulatorKey, &AccountOptions{Limiter: limiter})
	require.NoError(t, err)
	shards, err := AccountShards("paced", 2, acct)
	require.NoError(t, err)
	sq, err := NewShardedQueue("paced", shards, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = sq.Send(ctx, "x", nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second, "refused at once, not at the deadline")
	for _, h := range sq.Health() {
		assert.True(t, h.Healthy, "%s: %v", h.Shard, h.LastError)
	}
	assert.Zero(t, acct.Transactions().Total(), "nothing was sent")
}
