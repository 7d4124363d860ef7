package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

var allPages = []string{"", "poison", "payloads", "schedules", "latency", "listeners", "cost", "jobs", "confirm?do=purge-all", "static/app.css", "static/app.js"}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	t.Parallel()
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{memqueue.New("orders", nil)}})
	for _, page := range append(allPages, "nope") {
		_, hd, _ := get(t, srv, page)
		assert.Contains(t, hd.Get("Content-Security-Policy"), "default-src 'none'", page)
		assert.Contains(t, hd.Get("Content-Security-Policy"), "script-src 'self'", page)
		assert.Contains(t, hd.Get("Content-Security-Policy"), "frame-ancestors 'none'", page)
		assert.Equal(t, "nosniff", hd.Get("X-Content-Type-Options"), page)
		assert.Equal(t, "no-referrer", hd.Get("Referrer-Policy"), page)
		assert.Equal(t, "no-store", hd.Get("Cache-Control"), page)
	}
}

func TestEveryPageRendersAndItsURLsStayUnderThePrefix(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 2)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	attr := regexp.MustCompile(`(?:href|src|action)="([^"]*)"`)
	for _, page := range allPages[:9] {
		status, _, body := get(t, srv, page)
		require.Equal(t, http.StatusOK, status, page)
		for _, m := range attr.FindAllStringSubmatch(body, -1) {
			u := m[1]
			assert.False(t, strings.HasPrefix(u, "/") || strings.Contains(u, "://") || strings.HasPrefix(u, ".."), "%s: %q is not relative to the prefix", page, u)
		}
		assert.NotContains(t, body, "style=", page)
		assert.NotContains(t, body, "<script>", page)
	}
	// Asked for without its slash, the prefix redirects to it, so that
	// relative URLs resolve under it.
	resp, err := client().Get(srv.URL + prefix)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, resp.StatusCode)
	assert.Equal(t, prefix+"/", resp.Header.Get("Location"))
}

func TestOverviewShowsEachQueueWithItsDepthPoisonAndAge(t *testing.T) {
	t.Parallel()
	orders := poisoned(t, "orders", 3)
	_, err := orders.Send(context.Background(), "x", nil)
	require.NoError(t, err)
	s0, s1 := memqueue.New("jobs-0", nil), memqueue.New("jobs-1", nil)
	set, err := azdispatch.NewShardedQueue("jobs", []azdispatch.Shard{s0, s1}, nil)
	require.NoError(t, err)
	for range 2 {
		_, err := s1.Send(context.Background(), "y", nil)
		require.NoError(t, err)
	}
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{orders, set}})
	_, _, body := get(t, srv, "")
	assert.Regexp(t, `data-name="orders">\s*<th scope="row">orders</th>\s*<td>queue</td>\s*<td class="num depth">1</td>\s*<td class="num poison">3</td>`, body)
	assert.Regexp(t, `data-name="jobs">\s*<th scope="row">jobs</th>\s*<td>sharded set \(2 shards\)</td>\s*<td class="num depth">2</td>`, body)
	assert.Regexp(t, `data-name="jobs-1">\s*<th scope="row">jobs-1</th>\s*<td>shard</td>\s*<td class="num depth">2</td>`, body)
	assert.Contains(t, body, "healthy")
	assert.Contains(t, body, `<svg class="spark"`)
	assert.Contains(t, body, `aria-sort="ascending"`)
}

func TestAbsentReadingsShowAsAbsentNotZero(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", &memqueue.Options{Intercept: func(ctx context.Context, queue string, op azdispatch.Op) error {
		if op == azdispatch.OpDepth {
			return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: 503, Code: "ServerBusy"}
		}
		return nil
	}})
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	_, _, body := get(t, srv, "")
	assert.Regexp(t, `<td class="num depth" title="not read: [^"]*ServerBusy[^"]*">—`, body)
}

func TestTheReadingIsSharedByEveryViewer(t *testing.T) {
	t.Parallel()
	var sources []azdispatch.Source
	for _, n := range []string{"a", "b"} {
		sources = append(sources, memqueue.New(n, nil))
	}
	h, srv := server(t, &dashboard.Options{Sources: sources, CacheFor: time.Hour})
	get(t, srv, "")
	one := h.Transactions().Total()
	// Four requests per memqueue: its depth, its pause (which a Queue's
	// depth request brings: see TestAQueuesPauseRidesOnItsDepthRead), its
	// poison queue's depth, a peek.
	assert.Equal(t, int64(4*len(sources)), one, "one viewer, one refresh")
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { get(t, srv, "") })
	}
	wg.Wait()
	assert.Equal(t, one, h.Transactions().Total(), "five more viewers within CacheFor cost nothing more")
	t.Logf("one reading of the overview over %d queues: %d requests (%+v)", len(sources), one, h.Transactions())
}

func TestReadOnlyShowsNoActionAndRefusesAForgedPost(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 2)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	for _, page := range []string{"", "poison", "payloads", "confirm?do=requeue&pq=orders-poison&id=x"} {
		_, _, body := get(t, srv, page)
		assert.NotContains(t, body, `action="act"`, page)
		assert.NotContains(t, body, "Requeue…", page)
		assert.Contains(t, body, "read-only", page)
	}
	status, _, _ := post(t, srv, url.Values{"do": {"purge-all"}, "confirm": {"yes"}})
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, 2, depth(t, q.PoisonQueue()), "nothing deleted")
}

func TestReadOnlyPerRequest(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 1)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true,
		ReadOnly: func(r *http.Request) bool { return r.Header.Get("X-Operator") == "" }})
	status, _, _ := post(t, srv, url.Values{"do": {"purge-all"}, "confirm": {"yes"}})
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, 1, depth(t, q.PoisonQueue()))
}

func TestACrossOriginPostIsRefusedInWriteMode(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 1)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	form := url.Values{"do": {"purge-all"}, "confirm": {"yes"}}
	req, err := http.NewRequest(http.MethodPost, srv.URL+prefix+"/act", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, 1, depth(t, q.PoisonQueue()))
}

func TestAGetChangesNothing(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 1)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	status, _, _ := get(t, srv, "act?do=purge-all&confirm=yes")
	assert.GreaterOrEqual(t, status, 400, "a GET of the action is refused")
	_, _, body := get(t, srv, "confirm?do=purge-all")
	assert.Contains(t, body, `method="post" action="act"`)
	assert.Equal(t, 1, depth(t, q.PoisonQueue()))
}

func TestAPostBodyIsBounded(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	status, _, _ := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {strings.Repeat("x", 1<<20)}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	assert.Equal(t, 0, depth(t, q))
}

func TestSendATestMessage(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	status, hd, _ := post(t, srv, url.Values{"do": {"send"}, "queue": {"orders"}, "text": {`{"hello":1}`}})
	assert.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "./?done=sent", hd.Get("Location"))
	assert.Equal(t, 1, depth(t, q))
	status, _, _ = post(t, srv, url.Values{"do": {"send"}, "queue": {"elsewhere"}, "text": {"x"}})
	assert.Equal(t, http.StatusBadRequest, status)
}

// TestAnHourLeftOpen measures what pages left open cost: five viewers
// refreshing every 10 s (the default) for an hour, on a clock the test
// moves, cost what one does: a reading per CacheFor.
func TestAnHourLeftOpen(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	q := memqueue.New("orders", nil)
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{q}, Now: clock})
	require.NoError(t, err)
	defer h.Close()
	for range 360 { // an hour of 10 s refreshes
		for range 5 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Equal(t, http.StatusOK, rec.Code)
		}
		mu.Lock()
		now = now.Add(10 * time.Second)
		mu.Unlock()
	}
	assert.Equal(t, int64(360*4), h.Transactions().Total(), "one reading per 10 s: 4 requests per memqueue")
	t.Logf("an hour, five viewers, one queue: %d requests (%+v)", h.Transactions().Total(), h.Transactions())
}
