package azdispatch

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestLimiterSchedule(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name  string
		rate  float64
		at    []time.Duration // when each request asks, from t0
		waits []time.Duration // how long each must wait
	}{
		{
			name:  "one at a time at 10/s: each waits its interval",
			rate:  10,
			at:    []time.Duration{0, 0, 0, 0},
			waits: []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond},
		},
		{
			name:  "a quiet spell earns no more than the burst",
			rate:  10,
			at:    []time.Duration{0, 5 * time.Second, 5 * time.Second},
			waits: []time.Duration{0, 0, 100 * time.Millisecond},
		},
		{
			name: "100/s runs a tenth of a second ahead, then paces",
			rate: 100,
			at:   []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			waits: []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				10 * time.Millisecond, 20 * time.Millisecond},
		},
		{
			name:  "requests at the rate never wait",
			rate:  4,
			at:    []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond},
			waits: []time.Duration{0, 0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewRequestLimiter(tt.rate)
			require.NotNil(t, l)
			for i, at := range tt.at {
				assert.Equal(t, tt.waits[i], max(0, l.reserve(t0.Add(at))), "request %d", i)
			}
		})
	}
}

func TestRequestLimiterNeverExceedsItsRate(t *testing.T) {
	// 20,000/s, as for one account; a million requests asked for all at once
	// are spread so that any one second holds at most a second's worth plus
	// the burst.
	l := NewRequestLimiter(20_000)
	t0 := time.Unix(1_700_000_000, 0)
	const n = 1_000_000
	last := time.Duration(0)
	for range n {
		last = max(0, l.reserve(t0))
	}
	burst := 20_000 / 10
	assert.GreaterOrEqual(t, last, time.Duration(n-burst)*50*time.Microsecond)
}

func TestRequestLimiterWithoutARateDoesNotLimit(t *testing.T) {
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		l := NewRequestLimiter(rate)
		assert.Nil(t, l, "rate %v", rate)
		assert.NoError(t, l.Wait(context.Background()), "a nil limiter lets everything through")
	}
}

func TestRequestLimiterWaitEndsWithItsContext(t *testing.T) {
	l := NewRequestLimiter(1) // a burst of one: the second request waits a second
	require.NoError(t, l.Wait(context.Background()))
	cause := errors.New("shutting down")
	ended, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	assert.ErrorIs(t, l.Wait(ended), cause, "an ended context takes no turn")
	for range 100 {
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Millisecond, cause)
		assert.ErrorIs(t, l.Wait(ctx), cause)
		cancel()
	}
	// The hundred cancelled turns were given back: the next request waits
	// for one interval at most, not a hundred.
	assert.LessOrEqual(t, l.reserve(time.Now()), time.Second)
}

// TestAccountLimiterPacesEveryAttempt checks, against Azurite, that an
// account's limiter spaces its HTTP attempts, retries included, and that a
// request whose context ends while it waits is neither sent nor counted.
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
	const rate = 20 // a burst of 2, then one request each 50 ms
	opts := faultyAccountOptions(f, 3)
	opts.Limiter = NewRequestLimiter(rate)
	acct := testAccount(t, opts)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))
	for range 6 {
		_, err := q.Send(ctx, "paced", nil)
		require.NoError(t, err)
	}
	failures.set(2)
	batch, err := q.Receive(ctx, 32, time.Minute) // two 503s, then the answer
	require.NoError(t, err)
	assert.Len(t, batch, 6)

	mu.Lock()
	n := len(sent)
	span := sent[n-1].Sub(sent[0])
	mu.Unlock()
	assert.Equal(t, 10, n, "a create, six sends, three receive attempts")
	assert.EqualValues(t, n, acct.Transactions().Total())
	// A lower bound only: the limiter guarantees the spacing; how much later
	// the requests went depends on the machine.
	assert.GreaterOrEqual(t, span, time.Duration(n-2)*time.Second/rate, "10 attempts after a burst of 2")

	// The limiter's next turn is at least 50 ms away: a context that ends
	// first gets its error back, and the request is not sent.
	waitCtx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_, err = q.Send(waitCtx, "never sent", nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.EqualValues(t, n, acct.Transactions().Total(), "not counted")
	mu.Lock()
	assert.Len(t, sent, n, "not sent")
	mu.Unlock()
}
