package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/memqueue"
)

// prefix is where the tests mount the dashboard: not the root, so that a
// URL that escapes it shows.
const prefix = "/ops/azdispatch"

// server mounts a dashboard over opts under prefix.
func server(t *testing.T, opts *dashboard.Options) (*dashboard.Handler, *httptest.Server) {
	t.Helper()
	h, err := dashboard.New(opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, h.Close())
	})
	return h, srv
}

// client follows no redirect, so that a test sees the 303 of an action.
//
// Its transport is its own and keeps no idle connection: on
// http.DefaultTransport, a parallel test's httptest.Server.Close, which
// closes that transport's idle connections, could break a request that had
// just taken one ("http: CloseIdleConnections called").
func client() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// get fetches a page under the prefix and returns its status, headers and body.
func get(t *testing.T, srv *httptest.Server, page string) (int, http.Header, string) {
	t.Helper()
	resp, err := client().Get(srv.URL + prefix + "/" + page)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// post sends a form as a same-origin browser would.
func post(t *testing.T, srv *httptest.Server, form url.Values) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+prefix+"/act", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// poisoned returns a memqueue queue whose poison queue holds n envelopes,
// poisoned by a real listener whose handler refuses every message
// (reason "refused: bad order"); each body holds an e-mail address.
func poisoned(t *testing.T, name string, n int) *memqueue.Queue {
	t.Helper()
	q := memqueue.New(name, nil)
	ctx := context.Background()
	for i := range n {
		_, err := q.Send(ctx, fmt.Sprintf(`{"order":%d,"email":"person%d@example.com"}`, i, i), nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[map[string]any]) error {
		return azdispatch.Permanent(errors.New("refused: bad order"))
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}, DrainTimeout: time.Second})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { return l.State().Poisoned == int64(n) }, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	return q
}

func depth(t *testing.T, q azdispatch.Source) int {
	t.Helper()
	d, err := q.Depth(context.Background())
	require.NoError(t, err)
	return d
}

// envelope writes a poison envelope into q's poison queue by hand, poisoned
// two hours ago, and returns its ID there.
func envelope(t *testing.T, q *memqueue.Queue, e azdispatch.PoisonEnvelope, body string) string {
	t.Helper()
	if e.PoisonedAt.IsZero() {
		e.PoisonedAt = time.Now().Add(-2 * time.Hour)
		e.InsertedAt = e.PoisonedAt.Add(-time.Minute)
	}
	hdr, err := json.Marshal(e)
	require.NoError(t, err)
	id, err := q.PoisonQueue().Send(context.Background(), wire.PoisonMagic+string(hdr)+"\n"+body, nil)
	require.NoError(t, err)
	return id
}

// rawServer mounts h under prefix with http.StripPrefix alone, with no
// ServeMux of the test's own in front: so that only the dashboard's own
// path handling (and its redirects) is seen.
func rawServer(t *testing.T, h *dashboard.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.StripPrefix(prefix, h))
	t.Cleanup(srv.Close)
	return srv
}

// waitJob waits until the jobs page shows no running job, and returns it.
func waitJob(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	var body string
	require.Eventually(t, func() bool {
		_, _, body = get(t, srv, "jobs")
		return !strings.Contains(body, `data-state="running"`)
	}, 30*time.Second, 10*time.Millisecond)
	return body
}
