package azdispatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func TestHTTPNotifierMergesWakeUpsAndReportsFailures(t *testing.T) {
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

	n := NewHTTPNotifier(srv.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	for range 1000 {
		n.Notify()
	}
	close(gate)
	waitFor(t, "the wake-ups sent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return posts >= 1
	})
	cancel()
	wg.Wait()
	assert.LessOrEqual(t, posts, 2, "1,000 wake-ups merged into at most one in flight and one pending")

	failed := make(chan error, 1)
	bad := NewHTTPNotifier("http://127.0.0.1:1/wake?sig=secret", nil)
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

	c := newTally()
	cfg := quick()
	cfg.Idle = atMaxBackOff
	cfg.Wake = &wake
	l, err := NewListener(q, c.handler(nil), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "backing off", func() bool { return l.State().IdleDequeuers == 1 })

	// The publishing side: its own account and queue handle, and a notifier
	// called after each send.
	notifier := NewHTTPNotifier(srv.URL, nil)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel below, which ends the notifier
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Go(func() { _ = notifier.Run(ctx) })
	p, err := NewPublisher[job](elsewhere(t, q), &PublisherOptions{OnSent: func(context.Context, string) { notifier.Notify() }})
	require.NoError(t, err)
	for i := range 5 {
		_, err := p.Send(context.Background(), job{N: i})
		require.NoError(t, err)
	}
	waitFor(t, "handled long before the back-off ends", func() bool { return c.succeeded() == 5 })
	require.NoError(t, stop())
	assertSettled(t, l.State())
}

// Notify reports a EventWoken event only when it ends a back-off or starts a
// dequeuer; a send to a listener that is busy is counted in Wakes only.
func TestWokenEventOnlyWhenSomethingWoke(t *testing.T) {
	var woken atomic.Int64
	cfg := quick()
	cfg.OnEvent = func(e Event) {
		if e.Kind == EventWoken {
			woken.Add(1)
		}
	}
	l, err := NewListener(testQueue(t), func(context.Context, *Message[job]) error { return nil }, cfg)
	require.NoError(t, err)

	l.Notify() // no dequeuer running
	assert.EqualValues(t, 1, woken.Load())

	l.stats.active.Store(2) // both busy
	for range 100 {
		l.Notify()
	}
	assert.EqualValues(t, 1, woken.Load(), "busy dequeuers: no event")

	l.stats.idle.Store(1) // one backing off
	l.Notify()
	assert.EqualValues(t, 2, woken.Load())
	assert.EqualValues(t, 102, l.State().Wakes, "every call counted")
}
