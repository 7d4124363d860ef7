package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/storagefault"
	"github.com/azdispatch/azdispatch/memqueue"
)

// probe GETs h (method, if given, instead) and decodes its answer.
func probe(t testing.TB, h http.Handler, method ...string) (int, healthReport) {
	t.Helper()
	m := http.MethodGet
	if len(method) > 0 {
		m = method[0]
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(m, "/probe", nil))
	var rep healthReport
	if m == http.MethodGet && rec.Code != http.StatusMethodNotAllowed {
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rep), rec.Body.String())
	}
	return rec.Code, rep
}

// check finds the named check in a probe's body.
func check(t testing.TB, rep healthReport, name string) checkReport {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no such check", "%q in %+v", name, rep)
	return checkReport{}
}

func TestHealthReadinessNamesEachCheckAndItsReason(t *testing.T) {
	t.Parallel()
	h := NewHealth(nil)
	code, rep := probe(t, h.Readiness())
	assert.Equal(t, http.StatusOK, code, "nothing to wait for")
	assert.Equal(t, "ready", rep.Status)
	assert.NotNil(t, rep.Checks, "an empty list, not null")

	var broken atomic.Bool
	h.Add("orders", CheckerFunc(func() error { return nil }))
	h.Add("billing", CheckerFunc(func() error {
		if broken.Load() {
			return fmt.Errorf("%w: GET https://acct.queue.core.windows.net/billing?sv=2023&sig=SECRET: refused", azdispatch.ErrNotReady)
		}
		return nil
	}))
	code, rep = probe(t, h.Readiness())
	assert.Equal(t, http.StatusOK, code)
	assert.Len(t, rep.Checks, 2)
	assert.NoError(t, h.Ready())

	broken.Store(true)
	code, rep = probe(t, h.Readiness())
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready", rep.Status)
	assert.True(t, *check(t, rep, "orders").Ready)
	b := check(t, rep, "billing")
	assert.False(t, *b.Ready)
	require.NotNil(t, b.Since)
	assert.Contains(t, b.Reason, "https://acct.queue.core.windows.net/billing: refused")
	assert.NotContains(t, b.Reason, "SECRET")
	assert.NotContains(t, b.Reason, "sv=")
	err := h.Ready()
	assert.ErrorIs(t, err, azdispatch.ErrNotReady)
	assert.Contains(t, err.Error(), "billing")
	assert.NotContains(t, err.Error(), "SECRET")

	since := *b.Since
	_, rep = probe(t, h.Readiness())
	assert.Equal(t, since, *check(t, rep, "billing").Since, "since is when a probe first saw it failing")

	broken.Store(false)
	code, rep = probe(t, h.Readiness())
	assert.Equal(t, http.StatusOK, code)
	assert.Nil(t, check(t, rep, "billing").Since)

	code, _ = probe(t, h.Readiness(), http.MethodPost)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	rec := httptest.NewRecorder()
	h.Readiness().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/readyz", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Empty(t, rec.Body.String(), "HEAD has no body")
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))

	assert.Panics(t, func() { h.Add("orders", CheckerFunc(func() error { return nil })) }, "a name twice")
	assert.Panics(t, func() { h.Add("x", nil) })
	assert.Panics(t, func() { h.Add("", CheckerFunc(func() error { return nil })) })
}

func TestHealthReasonsCarryNoCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"a SAS URL", `Get "https://a.queue.core.windows.net/q/messages?se=2030&sig=abc%2Bdef&sv=2023": dial tcp: refused`,
			`Get "https://a.queue.core.windows.net/q/messages": dial tcp: refused`},
		{"user information", "http://user:pass@host:8080/path?x=1#frag failed", "http://host:8080/path failed"},
		{"a connection string's key", "bad DefaultEndpointsProtocol=https;AccountName=a;AccountKey=c2VjcmV0;EndpointSuffix=x",
			"bad DefaultEndpointsProtocol=https;AccountName=a;AccountKey=REDACTED;EndpointSuffix=x"},
		{"a bare signature", "token sig=abc&se=1 expired", "token sig=REDACTED&se=1 expired"},
		{"nothing to hide", `azdispatch: receive on queue "orders": 403 AuthenticationFailed`,
			`azdispatch: receive on queue "orders": 403 AuthenticationFailed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, redactedError(errors.New(tt.in)))
		})
	}
	long := redactedError(errors.New(strings.Repeat("é", maxReason)))
	assert.LessOrEqual(t, len(long), maxReason+len("…"))
	assert.True(t, strings.HasSuffix(long, "…"))
}

// Liveness fails only when a component run through Health.Run gave up while
// its context was live; a shutdown's error does not count, and running it
// again heals it.
func TestHealthLivenessFailsOnlyWhenARunGivesUp(t *testing.T) {
	t.Parallel()
	h := NewHealth(nil)
	code, rep := probe(t, h.Liveness())
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "live", rep.Status)

	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- h.Run(ctx, "orders", func(ctx context.Context) error {
			close(entered)
			<-ctx.Done()
			return azdispatch.ErrHandlersAbandoned // an error at shutdown: the process is ending anyway
		})
	}()
	<-entered
	code, rep = probe(t, h.Liveness())
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, *check(t, rep, "orders").Live)
	cancel()
	assert.ErrorIs(t, <-done, azdispatch.ErrHandlersAbandoned)
	code, _ = probe(t, h.Liveness())
	assert.Equal(t, http.StatusOK, code, "an error after the context ended is a shutdown, not a wedge")

	gaveUp := fmt.Errorf("listener stopped: %w", azdispatch.ErrFatal)
	assert.Equal(t, gaveUp, h.Run(context.Background(), "orders", func(context.Context) error { return gaveUp }))
	code, rep = probe(t, h.Liveness())
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not live", rep.Status)
	c := check(t, rep, "orders")
	assert.False(t, *c.Live)
	assert.Contains(t, c.Reason, "listener stopped")
	require.NotNil(t, c.Since)
	assert.Error(t, h.Live())

	require.NoError(t, h.Run(context.Background(), "orders", func(context.Context) error { return nil }))
	code, _ = probe(t, h.Liveness())
	assert.Equal(t, http.StatusOK, code, "run again, it is live again")
	assert.NoError(t, h.Live())
	_, rep = probe(t, h.Liveness())
	assert.Len(t, rep.Checks, 1, "one record per name")
}

// handleNothing is a handler that succeeds at once.
func handleNothing(context.Context, *azdispatch.Message[int]) error { return nil }

// readinessLatency polls h's readiness until it answers want, checking on
// every poll that liveness stays 200 (a storage fault must never restart
// the pod), and returns how long it took.
func readinessLatency(t testing.TB, h *Health, want int) (time.Duration, healthReport) {
	t.Helper()
	start := time.Now()
	var rep healthReport
	require.Eventually(t, func() bool {
		live, lrep := probe(t, h.Liveness())
		require.Equal(t, http.StatusOK, live, "liveness must not fail on a storage fault: %+v", lrep)
		var code int
		code, rep = probe(t, h.Readiness())
		return code == want
	}, 60*time.Second, 5*time.Millisecond, "readiness never answered %d", want)
	return time.Since(start), rep
}

// A listener's readiness turns 503 within one receive back-off of a fatal
// error (403) or of a run of failed receives (503 ServerBusy), and 200 again
// with the first receive after storage recovers, the wait for which is the
// receive back-off reached meanwhile; liveness stays 200 throughout.
func TestHealthReadinessFollowsStorageFaultsAndRecovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		code   string
		// failures is how many failed receives make the listener not
		// ready: a fatal one at once, transient ones after a run.
		failures int
	}{
		{"fatal 403", http.StatusForbidden, "AuthorizationFailure", 1},
		{"a run of 503s", http.StatusServiceUnavailable, "ServerBusy", 3}, // a listener is not ready after 3 in a row
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var faulty atomic.Bool
			a := answeringAccount(t, func(req *http.Request) *http.Response {
				if faulty.Load() && storagefault.IsReceive(req) {
					return storagefault.ServiceError(req, tt.status, tt.code, nil)
				}
				return nil
			})
			q := newQueue(t, a, 0, uniqueName(t))
			cfg := quick() // idle back-off up to 200 ms
			l, err := azdispatch.NewListener(q, handleNothing, cfg)
			require.NoError(t, err)

			h := NewHealth(nil)
			h.Add("orders", l)
			code, rep := probe(t, h.Readiness())
			assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before Run")
			assert.Contains(t, check(t, rep, "orders").Reason, "not running")

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- h.Run(ctx, "orders", l.Run) }()
			defer func() {
				cancel()
				assert.NoError(t, <-done)
			}()
			_, _ = readinessLatency(t, h, http.StatusOK)

			faulty.Store(true)
			down, rep := readinessLatency(t, h, http.StatusServiceUnavailable)
			reason := check(t, rep, "orders").Reason
			assert.Contains(t, reason, tt.code)
			assert.Contains(t, reason, q.Name())
			if tt.failures == 1 {
				assert.Contains(t, reason, "fatal storage error")
			} else {
				assert.Contains(t, reason, "receives failed in a row")
			}
			// The bound: one idle wait (at most the 200 ms cap) before the
			// first failed receive, then the back-offs between the failures
			// that make it unready (250 ms, 500 ms, …, +20%).
			bound := 200 * time.Millisecond
			for n := 1; n < tt.failures; n++ {
				bound += time.Duration(float64(250*time.Millisecond) * float64(int(1)<<(n-1)) * 1.2)
			}
			t.Logf("%s: not ready %v after the fault began (expected within about %v: idle wait plus the back-offs of %d failed receives)",
				tt.name, down.Round(time.Millisecond), bound, tt.failures)

			// Storage recovers: the next receive comes after the back-off
			// that the failures so far have reached.
			faulty.Store(false)
			failed := l.State().ReceiveErrors
			backoff := time.Duration(float64(250*time.Millisecond) * float64(int64(1)<<min(failed-1, 7)) * 1.2)
			up, _ := readinessLatency(t, h, http.StatusOK)
			t.Logf("%s: ready again %v after storage recovered (%d receives had failed; the back-off then is at most %v)",
				tt.name, up.Round(time.Millisecond), failed, min(backoff, 36*time.Second))
			assert.NoError(t, l.Ready())
		})
	}
}

// A listener that gives up (FatalTimeout) fails liveness through Health.Run;
// readiness says it is not running. Running it again heals both.
func TestHealthLivenessFailsWhenAListenerGivesUpAfterFatalTimeout(t *testing.T) {
	t.Parallel()
	var revoked atomic.Bool
	revoked.Store(true)
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if revoked.Load() && storagefault.IsReceive(req) {
			return storagefault.ServiceError(req, http.StatusForbidden, "AuthenticationFailed", nil)
		}
		return nil
	})
	q := newQueue(t, a, 0, uniqueName(t))
	cfg := quick()
	cfg.FatalTimeout = 300 * time.Millisecond
	l, err := azdispatch.NewListener(q, handleNothing, cfg)
	require.NoError(t, err)
	h := NewHealth(nil)
	h.Add("orders", l)

	err = h.Run(context.Background(), "orders", l.Run)
	require.ErrorIs(t, err, azdispatch.ErrFatal)
	code, rep := probe(t, h.Liveness())
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, check(t, rep, "orders").Reason, "403 AuthenticationFailed")
	code, rep = probe(t, h.Readiness())
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, check(t, rep, "orders").Reason, "not running")

	revoked.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx, "orders", l.Run) }()
	require.Eventually(t, func() bool {
		code, _ := probe(t, h.Liveness())
		return code == http.StatusOK
	}, 60*time.Second, 5*time.Millisecond, "live again once it runs again")
	_, _ = readinessLatency(t, h, http.StatusOK)
	cancel()
	require.NoError(t, <-done)
	code, _ = probe(t, h.Liveness())
	assert.Equal(t, http.StatusOK, code, "a clean shutdown leaves it live")
}

// A sharded queue with a shard out is ready (its other shards serve), and
// the probe names the shard, since when and why in "degraded", with no
// credential; once a request to it succeeds, "degraded" is gone.
func TestReadinessNamesAShardThatIsOutAndStaysReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := memqueue.New("orders-0", nil), memqueue.New("orders-1", nil)
	sq, err := azdispatch.NewShardedQueue("orders", []azdispatch.Shard{a, b}, &azdispatch.ShardedQueueOptions{RetryMin: time.Hour, RetryMax: time.Hour})
	require.NoError(t, err)
	h := NewHealth(nil)
	h.Add("orders", sq)

	code, rep := probe(t, h.Readiness())
	require.Equal(t, http.StatusOK, code)
	assert.Empty(t, check(t, rep, "orders").Degraded)

	down := &azdispatch.StorageError{Op: azdispatch.OpSend, Queue: "orders-1", StatusCode: 503, Code: "ServerBusy",
		Err: errors.New("GET https://acct.queue.core.windows.net/orders-1?sig=SECRET")}
	b.FailNext(azdispatch.OpSend, 1, down)
	for range 2 {
		_, err := sq.Send(ctx, "x", nil) // one lands on each shard, round-robin: b fails over to a
		require.NoError(t, err)
	}
	code, rep = probe(t, h.Readiness())
	assert.Equal(t, http.StatusOK, code, "the other shard serves: ready")
	c := check(t, rep, "orders")
	assert.True(t, *c.Ready)
	assert.Contains(t, c.Degraded, `"orders-1" out since`)
	assert.Contains(t, c.Degraded, "1 of 2 shards out")
	assert.Contains(t, c.Degraded, "ServerBusy")
	assert.NotContains(t, c.Degraded, "SECRET")
	assert.NoError(t, sq.Ready())

	a.FailNext(azdispatch.OpSend, 1, down)
	_, err = sq.Send(ctx, "x", nil)
	require.ErrorIs(t, err, azdispatch.ErrNoHealthyShard, "every shard out")
	assert.ErrorIs(t, sq.Ready(), azdispatch.ErrNoHealthyShard)
	code, _ = probe(t, h.Readiness())
	assert.Equal(t, http.StatusServiceUnavailable, code, "no shard left: not ready")
}
