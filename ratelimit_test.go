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
				now := t0.Add(at)
				assert.Equal(t, tt.waits[i], max(0, l.reserve(now).Sub(now)-l.tolerance), "request %d", i)
			}
		})
	}
}

// sentIn counts the turns whose requests may go within [from, to).
func sentIn(l *RequestLimiter, dues []time.Time, from, to time.Time) int {
	n := 0
	for _, due := range dues {
		if at := due.Add(-l.tolerance); !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func TestRequestLimiterNeverExceedsItsRate(t *testing.T) {
	const rate = 20_000 // one account's target
	burst := rate / 10
	t0 := time.Unix(1_700_000_000, 0)
	second := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	t.Run("a crowd asking at once", func(t *testing.T) {
		l := NewRequestLimiter(rate)
		var dues []time.Time
		for range 5 * rate {
			dues = append(dues, l.reserve(t0))
		}
		assert.LessOrEqual(t, sentIn(l, dues, t0, second(1)), rate+burst)
		for s := 1; s < 4; s++ {
			assert.LessOrEqual(t, sentIn(l, dues, second(s), second(s+1)), rate, "second %d", s)
		}
	})

	// Two seconds of requests wait; those due in the first second are
	// cancelled, first to last, and a second's worth of new requests ask
	// at t0+1s. The cancelled turns are not handed out again under the
	// feet of the requests still waiting.
	t.Run("cancellations amid waiting requests", func(t *testing.T) {
		l := NewRequestLimiter(rate)
		var waiting []time.Time
		for range 2 * rate {
			waiting = append(waiting, l.reserve(t0))
		}
		for _, due := range waiting[:rate] {
			l.giveBack(due)
		}
		live := waiting[rate:]
		for range rate {
			live = append(live, l.reserve(second(1)))
		}
		for s := 1; s < 3; s++ {
			assert.LessOrEqual(t, sentIn(l, live, second(s), second(s+1)), rate, "second %d", s)
		}
	})

	// Cancelled last to first, every turn is given back: the limiter is as
	// if they had never asked.
	t.Run("cancellations of the latest requests", func(t *testing.T) {
		l := NewRequestLimiter(rate)
		var dues []time.Time
		for range 3 * burst {
			dues = append(dues, l.reserve(t0))
		}
		for i := len(dues) - 1; i >= burst; i-- {
			l.giveBack(dues[i])
		}
		assert.Equal(t, dues[burst], l.reserve(t0), "the first turn given back is the next one out")
	})
}

func TestRequestLimiterClampsExtremeRates(t *testing.T) {
	slow := NewRequestLimiter(1e-15)
	assert.Positive(t, slow.interval, "a very slow rate does not overflow into no limit")
	fast := NewRequestLimiter(1e30)
	assert.Equal(t, time.Nanosecond, fast.interval)
	assert.GreaterOrEqual(t, fast.tolerance, time.Duration(0))
}

func TestRequestLimiterWithoutARateDoesNotLimit(t *testing.T) {
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		l := NewRequestLimiter(rate)
		assert.Nil(t, l, "rate %v", rate)
		assert.NoError(t, l.Wait(context.Background()), "a nil limiter lets everything through")
	}
}

func TestRequestLimiterWaitEndsWithItsContext(t *testing.T) {
	l := NewRequestLimiter(0.1) // a burst of one: the second request waits ten seconds
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
	now := time.Now()
	assert.LessOrEqual(t, l.reserve(now).Sub(now), 10*time.Second)
}

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
	const rate = 20 // a burst of 2, then one request each 50 ms
	opts := faultyAccountOptions(f, 3)
	opts.Limiter = NewRequestLimiter(rate)
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
	assert.GreaterOrEqual(t, span, time.Duration(n-2)*time.Second/rate, "11 turns after a burst of 2")

	// With ten turns taken, the next is at least 400 ms away: a context
	// that ends first gets its error back, and the request is not sent.
	for range 10 {
		opts.Limiter.reserve(time.Now())
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
	opts.Limiter = NewRequestLimiter(4) // a turn each 250 ms
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
