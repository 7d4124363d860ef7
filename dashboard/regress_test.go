package dashboard_test

import (
	"bufio"
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Close and a POST that starts a job, at once: the job either never starts
// (the POST is told the dashboard is closing) or starts before Close waits,
// and has ended when Close returns. Run with -race: a WaitGroup's Add
// racing its Wait is reported.
func TestCloseRacingAJobStartLeavesNoJobRunning(t *testing.T) {
	t.Parallel()
	for range 50 {
		q := poisonedByHand(t, "orders", 2)
		h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		var wg sync.WaitGroup
		wg.Go(func() {
			req := httptest.NewRequest(http.MethodPost, "/act", strings.NewReader("do=requeue-all&confirm=yes"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			h.ServeHTTP(rec, req)
		})
		wg.Go(func() { require.NoError(t, h.Close()) })
		wg.Wait()
		switch rec.Code {
		case http.StatusSeeOther:
			assert.Contains(t, rec.Header().Get("Location"), "job-started")
		case http.StatusServiceUnavailable:
			assert.Contains(t, rec.Body.String(), "closing")
		default:
			t.Fatalf("status %d", rec.Code)
		}
		jobs := httptest.NewRecorder()
		h.ServeHTTP(jobs, httptest.NewRequest(http.MethodGet, "/jobs", nil))
		assert.NotContains(t, jobs.Body.String(), `data-state="running"`, "a job outlived Close")
	}
	// And after Close, nothing starts.
	q := poisonedByHand(t, "orders", 1)
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	require.NoError(t, err)
	require.NoError(t, h.Close())
	srv := rawServer(t, h)
	status, _, body := post(t, srv, url.Values{"do": {"purge-all"}, "confirm": {"yes"}})
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, "closing")
	assert.Equal(t, 1, depth(t, q.PoisonQueue()))
	_, _, body = get(t, srv, "")
	assert.Regexp(t, `<td class="num poison">1</td>`, body, "a page still reads after Close")
	require.NoError(t, h.Close(), "Close again")
}

// A viewer who hangs up while the shared reading is taken gives up waiting;
// the reading goes on, and the next viewer sees it, not the first viewer's
// cancellation.
func TestAViewerWhoHangsUpDoesNotSpoilTheSharedReading(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	q := memqueue.New("orders", &memqueue.Options{Intercept: func(ctx context.Context, queue string, op azdispatch.Op) error {
		if op == azdispatch.OpDepth && queue == "orders" {
			once.Do(func() { close(started) })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}})
	_, err := q.Send(context.Background(), "x", nil)
	require.NoError(t, err)
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}, CacheFor: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	// firstDone is closed when the server is done with the first viewer's
	// request: it noticed the hang-up, and the handler returned.
	firstDone := make(chan struct{})
	var firstOnce sync.Once
	srv := httptest.NewServer(http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.Header.Get("X-First") != "" {
			firstOnce.Do(func() { close(firstDone) })
		}
	})))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+prefix+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-First", "yes")
	first := make(chan error, 1)
	go func() {
		resp, err := client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-started // the reading is under way, for the first viewer
	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
	<-firstDone // the first viewer's request is over (its context ended)
	close(release)

	status, _, body := get(t, srv, "")
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, body, "cancel")
	assert.NotContains(t, body, `title="not read`)
	assert.Regexp(t, `data-name="orders">\s*<th scope="row">orders</th>\s*<td>queue</td>\s*<td class="num depth">1</td>`, body)
}

// A reading nobody waits for any more (its viewer left) is stopped by
// Close, which waits for it: no goroutine outlives the handler.
func TestCloseStopsAReadingNobodyWaitsFor(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	var once sync.Once
	q := memqueue.New("orders", &memqueue.Options{Intercept: func(ctx context.Context, queue string, op azdispatch.Op) error {
		if op == azdispatch.OpDepth {
			once.Do(func() { close(started) })
			<-ctx.Done() // a storage account that never answers
			return ctx.Err()
		}
		return nil
	}})
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	}()
	<-started
	cancel()
	<-served // the viewer gave up; the reading still waits on storage
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not stop the reading")
	}
	// After Close a page still reads, within its own request.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/listeners", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
}

// Mounted with the trailing slash stripped too (a common way to mount,
// though not the documented one), "prefix/" is the root page, not a
// redirect to itself.
func TestMountedWithItsTrailingSlashStrippedServesTheRoot(t *testing.T) {
	t.Parallel()
	q := poisonedByHand(t, "orders", 1)
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix+"/", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, page := range []string{"", "poison", "static/app.css"} {
		status, hd, body := get(t, srv, page)
		assert.Equal(t, http.StatusOK, status, page)
		assert.Empty(t, hd.Get("Location"), page)
		if page == "" {
			assert.Contains(t, body, "<h1>Overview</h1>")
		}
	}
}

// No response, whatever the path, redirects outside the prefix, and the
// static directory is not listed: the dashboard matches paths itself,
// without ServeMux's cleaning redirects, whose Location is absolute.
func TestNoRedirectLeavesThePrefix(t *testing.T) {
	t.Parallel()
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{memqueue.New("orders", nil)}, Write: true})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	srv := rawServer(t, h)
	base, err := url.Parse(srv.URL + prefix + "/")
	require.NoError(t, err)
	paths := map[string]int{
		"static": 404, "static/": 404, "static/../handler.go": 404, "static/%2e%2e/handler.go": 404,
		"static/app.css/": 404, "poison/../cost": 404, "./cost": 404, "//evil.example/": 404,
		"%2fcost": 404, "poison/": 404, "templates/layout.html": 404, "cost": 200,
	}
	for p, want := range paths {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			req, err := http.NewRequest(m, srv.URL+prefix+"/"+p, nil)
			require.NoError(t, err)
			resp, err := client().Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, want, resp.StatusCode, "%s %s", m, p)
			if loc := resp.Header.Get("Location"); loc != "" {
				to, err := req.URL.Parse(loc)
				require.NoError(t, err)
				assert.True(t, to.Host == base.Host && strings.HasPrefix(to.Path, prefix+"/"), "%s %s -> %s", m, p, to)
			}
		}
	}
	// The bare prefix redirects under itself, also when asked for in
	// absolute form (the path of which is the client's, not the host's).
	for _, target := range []string{prefix, prefix + "?x=1", "http://evil.example" + prefix} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		require.NoError(t, err)
		_, err = io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		resp.Body.Close()
		conn.Close()
		assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode, target)
		assert.Equal(t, prefix+"/", resp.Header.Get("Location"), target)
	}
	// A request with no path to go by is not redirected anywhere.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.URL.Path, req.RequestURI = "", ""
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Empty(t, rec.Header().Get("Location"))
}

// Static files are served from the embedded set by name only, and every
// answer, a 404 or a 405 included, carries the security headers.
func TestStaticFilesAndTheirErrorsCarryTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{memqueue.New("orders", nil)}})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	srv := rawServer(t, h)
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "static/app.css", 200, "text/css"},
		{"HEAD", "static/app.css", 200, "text/css"},
		{"GET", "static/app.js", 200, "text/javascript"},
		{"GET", "static/favicon.svg", 200, "image/svg+xml"},
		{"GET", "static/nope.css", 404, "text/html"},
		{"HEAD", "static/nope.css", 404, "text/html"},
		{"GET", "static/..%2fhandler.go", 404, "text/html"},
		{"GET", "static/", 404, "text/html"},
		{"POST", "static/app.css", 405, "text/html"},
		{"DELETE", "poison", 405, "text/html"},
	} {
		req, err := http.NewRequest(c.method, srv.URL+prefix+"/"+c.path, nil)
		require.NoError(t, err)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := client().Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		what := c.method + " " + c.path
		assert.Equal(t, c.status, resp.StatusCode, what)
		assert.Contains(t, resp.Header.Get("Content-Type"), c.ctype, what)
		assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"), what)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'", what)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), what)
		assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), what)
		if c.path == "static/" {
			assert.NotContains(t, string(body), "<pre>", "no directory listing")
		}
		if c.status == 405 {
			assert.NotEmpty(t, resp.Header.Get("Allow"), what)
		}
	}
}

// A purge-all stopped part-way, by a failed delete or by Close, leaves
// every message it received and did not delete visible at once, not hidden
// for the rest of its visibility timeout.
func TestAStoppedPurgeLeavesEveryMessageItDidNotDeleteVisible(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"a delete fails", "Close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			reached := make(chan struct{})
			var mu sync.Mutex
			deletes := 0
			q := memqueue.New("orders", &memqueue.Options{Intercept: func(ctx context.Context, queue string, op azdispatch.Op) error {
				if op != azdispatch.OpDelete || queue != "orders-poison" {
					return nil
				}
				mu.Lock()
				deletes++
				n := deletes
				mu.Unlock()
				if n < 3 {
					return nil
				}
				if how == "a delete fails" {
					return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: 500, Code: "InternalError"}
				}
				if n == 3 {
					close(reached)
				}
				<-ctx.Done() // stopped only by Close
				return ctx.Err()
			}})
			for i := range 10 {
				envelope(t, q, azdispatch.PoisonEnvelope{Queue: "orders", MessageID: "m" + string(rune('a'+i)), Reason: "r"}, "{}")
			}
			h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
			require.NoError(t, err)
			t.Cleanup(func() { h.Close() })
			srv := rawServer(t, h)
			status, _, _ := post(t, srv, url.Values{"do": {"purge-all"}, "confirm": {"yes"}})
			require.Equal(t, http.StatusSeeOther, status)
			if how == "Close" {
				<-reached
				require.NoError(t, h.Close())
			}
			body := waitJob(t, srv)
			assert.Contains(t, body, "2 deleted")
			left := depth(t, q.PoisonQueue())
			require.Equal(t, 8, left)
			visible, err := q.PoisonQueue().(*memqueue.Queue).Peek(context.Background(), 32)
			require.NoError(t, err)
			assert.Len(t, visible, left, "every message left is visible")
		})
	}
}

// A long reason in a script of more than one byte a character: its group's
// link (the reason cut to a bound) shows its messages, and a purge-all
// with that filter finds them.
func TestAGroupLinkForALongNonASCIIReasonShowsItsMessages(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	reason := strings.Repeat("€", 100) + " Überweisung  fehlgeschlagen" // 300+ bytes: a cut at 200 falls inside a "€"
	envelope(t, q, azdispatch.PoisonEnvelope{Queue: "orders", MessageID: "m1", Reason: reason}, "{}")
	envelope(t, q, azdispatch.PoisonEnvelope{Queue: "orders", MessageID: "m2", Reason: "other"}, "{}")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, body := get(t, srv, "poison")
	m := regexp.MustCompile(`<a href="(poison\?reason=[^"]*)"><code class="shape">€`).FindStringSubmatch(body)
	require.NotNil(t, m, "a group link")
	href := html.UnescapeString(m[1])
	u, err := url.Parse(href)
	require.NoError(t, err)
	cut := u.Query().Get("reason")
	// The group is the reason's shape, cut to 200 bytes between
	// characters and marked so.
	require.True(t, strings.HasPrefix(reason, strings.TrimSuffix(cut, "…")), "the link's reason is a prefix of the reason, cut between characters")
	_, _, body = get(t, srv, href)
	assert.Equal(t, []string{"m1"}, ids(body))
	// Typed differently: in another case, with its spaces run together.
	_, _, body = get(t, srv, "poison?reason="+url.QueryEscape("ÜBERWEISUNG fehlgeschlagen"))
	assert.Equal(t, []string{"m1"}, ids(body))

	status, _, _ := post(t, srv, url.Values{"do": {"purge-all"}, "confirm": {"yes"}, "reason": {cut}})
	require.Equal(t, http.StatusSeeOther, status)
	assert.Contains(t, waitJob(t, srv), "1 deleted")
	assert.Equal(t, 1, depth(t, q.PoisonQueue()), "only the other is left")
}

var dataID = regexp.MustCompile(`data-id="([^"]+)"`)

// ids are the envelopes' message IDs a poison page lists.
func ids(body string) []string {
	var out []string
	for _, m := range dataID.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// The decoded view shows numbers exactly as written, not through float64.
func TestTheDecodedViewKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	envelope(t, q, azdispatch.PoisonEnvelope{Queue: "orders", MessageID: "m1", Reason: "r"},
		`{"order_id":12345678901234567891,"price":0.1000000000000000055511151231257827,"big":1e400}`)
	for _, codec := range []azdispatch.Codec{nil, azdispatch.JSON()} {
		_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Codec: codec})
		_, _, body := get(t, srv, "poison?reveal=1")
		assert.Contains(t, body, "&#34;order_id&#34;: 12345678901234567891")
		assert.Contains(t, body, "&#34;price&#34;: 0.1000000000000000055511151231257827")
		assert.Contains(t, body, "&#34;big&#34;: 1e400")
	}
	// Through Base64(JSON) too.
	q2 := memqueue.New("b64", nil)
	envelope(t, q2, azdispatch.PoisonEnvelope{Queue: "b64", MessageID: "m1", Reason: "r"}, "eyJuIjoxMjM0NTY3ODkwMTIzNDU2Nzg5MX0=") // {"n":12345678901234567891}
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q2}, Codec: azdispatch.Base64(azdispatch.JSON())})
	_, _, body := get(t, srv, "poison?reveal=1")
	assert.Contains(t, body, "&#34;n&#34;: 12345678901234567891")
}

// The errors pages show say what failed, never where: no address, host,
// port or URL, even from a transport error.
func TestPagesShowWhatFailedNotWhere(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 10001},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	transport := &url.Error{Op: "Get", URL: "http://10.1.2.3:10001/acct/orders?sig=SECRET", Err: dial}
	q := memqueue.New("orders", &memqueue.Options{Intercept: func(ctx context.Context, queue string, op azdispatch.Op) error {
		if op == azdispatch.OpDepth || op == azdispatch.OpSend {
			return &azdispatch.StorageError{Op: op, Queue: queue, Err: transport}
		}
		return nil
	}})
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, overview := get(t, srv, "")
	status, _, sent := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {"x"}})
	assert.Equal(t, http.StatusBadGateway, status)
	for _, body := range []string{overview, sent} {
		for _, s := range []string{"10.1.2.3", "10001", "://", "SECRET", "sig="} {
			assert.NotContains(t, body, s)
		}
	}
	assert.Contains(t, overview, `depth on queue &#34;orders&#34;: connection refused`)
	assert.Contains(t, sent, "The send failed: send on queue &#34;orders&#34;: connection refused")
}

// A test send of text a queue message cannot carry (NUL, invalid UTF-8) is
// refused by the dashboard, as the client's mistake, before any request.
func TestATestSendOfTextAQueueCannotCarryIsABadRequest(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	for _, text := range []string{"a\x00b", "\xff\xfe", "bell\x07"} {
		status, _, body := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {text}})
		assert.Equal(t, http.StatusBadRequest, status, "%q", text)
		assert.Contains(t, body, "valid UTF-8")
	}
	status, _, _ := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {"tab\there\nand € too"}})
	assert.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, 1, depth(t, q), "only the good send reached the queue")
}

// poisonedByHand is a queue whose poison queue holds n envelopes written
// directly (quicker than a listener's).
func poisonedByHand(t *testing.T, name string, n int) *memqueue.Queue {
	t.Helper()
	q := memqueue.New(name, nil)
	for i := range n {
		envelope(t, q, azdispatch.PoisonEnvelope{Queue: name, MessageID: "m" + string(rune('a'+i)), Reason: "refused"}, `{"order":1}`)
	}
	return q
}
