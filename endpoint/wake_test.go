package endpoint

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

func TestWakeHandlerAcceptsOnlyPost(t *testing.T) {
	t.Parallel()
	var h WakeHandler
	var woken int
	cancel := h.Subscribe(func() { woken++ })

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/wake", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Zero(t, woken)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/wake", nil))
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Equal(t, 1, woken)

	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/wake", nil))
	assert.Equal(t, 1, woken, "a cancelled subscription is not called")
}

func TestNotifierMergesWakeUpsAndReportsFailures(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		posts int
		gate  = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate // hold the first request so that the rest pile up
		mu.Lock()
		posts++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	n := NewNotifier(srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	for range 1000 {
		n.Notify()
	}
	close(gate)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return posts >= 1
	}, time.Minute, time.Millisecond, "the wake-ups sent")
	cancel()
	wg.Wait()
	assert.LessOrEqual(t, posts, 2, "1,000 wake-ups merged into at most one in flight and one pending")

	failed := make(chan error, 1)
	bad := NewNotifier("http://127.0.0.1:1/wake?sig=secret", nil)
	bad.OnError = func(err error) { failed <- err }
	ctx, cancel = context.WithCancel(context.Background())
	wg.Go(func() { _ = bad.Run(ctx) })
	bad.Notify()
	err := <-failed
	cancel()
	wg.Wait()
	assert.NotContains(t, err.Error(), "secret", "the URL's query is not echoed")
}

func TestListenerWokenOverHTTPFromAnotherProcess(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	var wake WakeHandler
	srv := httptest.NewServer(&wake)
	defer srv.Close()

	var handled atomic.Int64
	cfg := quick()
	// Backing off for a minute: only a wake-up gets the work handled soon.
	cfg.Scaling.Idle = func(azdispatch.State, int) (time.Duration, bool) { return time.Minute, false }
	cfg.Scaling.Wake = &wake
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[int]) error {
		handled.Add(1)
		return nil
	}, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { assert.NoError(t, l.Run(ctx)) })
	require.Eventually(t, func() bool { return l.State().IdleDequeuers == 1 }, time.Minute, time.Millisecond, "backing off")

	// The publishing side: its own account and queue handle, and a notifier
	// called after each send.
	notifier := NewNotifier(srv.URL, nil)
	wg.Go(func() { _ = notifier.Run(ctx) })
	elsewhere, err := account(t, 0, nil).Queue(q.Name())
	require.NoError(t, err)
	p, err := azdispatch.NewPublisher[int](elsewhere, &azdispatch.PublisherOptions{OnSent: func(context.Context, string) { notifier.Notify() }})
	require.NoError(t, err)
	for i := range 5 {
		_, err := p.Send(context.Background(), i)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return handled.Load() == 5 }, 30*time.Second, time.Millisecond,
		"handled long before the back-off ends")
}

// A POST that a browser makes from a page of another origin does not wake
// anyone: no web page can make a listener poll.
func TestWakeHandlerRefusesCrossOriginPosts(t *testing.T) {
	t.Parallel()
	var h WakeHandler
	var woken atomic.Int64
	h.Subscribe(func() { woken.Add(1) })
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"cross-site fetch", http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"another origin", http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"same origin", http.Header{"Sec-Fetch-Site": {"same-origin"}}, http.StatusNoContent},
		{"not a browser", nil, http.StatusNoContent},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://worker:8080/wake", nil)
		for k, v := range tc.header {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.want, rec.Code, tc.name)
	}
	assert.EqualValues(t, 2, woken.Load(), "only the allowed posts woke it")
}
