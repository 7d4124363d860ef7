package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// TestMain fails a run that leaves a goroutine behind: the dashboards'
// jobs, the listeners, the servers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Connections the accounts kept idle to Azurite, closed by it once
		// it stops; see the library's own leak tests.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
	)
}

// prefix is where the dashboard is mounted: not the root, so that a URL
// that escapes it shows.
const prefix = "/ops/azdispatch/"

// poisonCount is how many messages the poison view starts with.
const poisonCount = 4

// screenshotsEnv names the folder the screenshots go to.
const screenshotsEnv = "AZDISPATCH_SCREENSHOTS"

func unique(base string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return base + hex.EncodeToString(b)
}

// fixture is a storage account with a queue holding poisoned messages and
// a sharded set with messages on one shard.
type fixture struct {
	orders *azdispatch.Queue
	set    *azdispatch.ShardedQueue
	shards []*azdispatch.Queue
}

func newFixture(t *testing.T, conn string) *fixture {
	t.Helper()
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(conn, nil)
	require.NoError(t, err)
	f := &fixture{}
	f.orders, err = account.Queue(unique("orders"))
	require.NoError(t, err)
	require.NoError(t, f.orders.Create(ctx))
	base := unique("jobs")
	shards, err := azdispatch.AccountShards(base, 2, account)
	require.NoError(t, err)
	for _, s := range shards {
		q := s.(*azdispatch.Queue)
		require.NoError(t, q.Create(ctx))
		f.shards = append(f.shards, q)
	}
	f.set, err = azdispatch.NewShardedQueue(base, shards, nil)
	require.NoError(t, err)
	for i := range 3 {
		_, err := f.shards[1].Send(ctx, fmt.Sprintf(`{"job":%d}`, i), nil)
		require.NoError(t, err)
	}

	// Poison: a real listener whose handler refuses every message.
	for i := range poisonCount {
		_, err := f.orders.Send(ctx, fmt.Sprintf(`{"order":%d,"email":"customer%d@example.com"}`, i, i), nil)
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(f.orders, func(ctx context.Context, m *azdispatch.Message[map[string]any]) error {
		return azdispatch.Permanent(errors.New("refused: the order has no address"))
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)}, DrainTimeout: time.Second})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { return l.State().Poisoned == poisonCount }, time.Minute, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	return f
}

func (f *fixture) depth(t *testing.T, q azdispatch.Source) int {
	t.Helper()
	d, err := q.Depth(context.Background())
	require.NoError(t, err)
	return d
}

// site is a dashboard mounted under prefix in an httptest server, which
// records every path asked of it.
type site struct {
	h   *dashboard.Handler
	srv *httptest.Server
	url string // the dashboard's root, with the prefix

	mu     sync.Mutex
	paths  []string
	status map[string]int // the last status of each method and path
}

func newSite(t *testing.T, opts *dashboard.Options) *site {
	t.Helper()
	h, err := dashboard.New(opts)
	require.NoError(t, err)
	s := &site{h: h, status: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle(prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), h))
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(rec, r)
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.status[r.Method+" "+r.URL.Path] = rec.code
		s.mu.Unlock()
	}))
	s.url = s.srv.URL + prefix
	t.Cleanup(func() {
		s.srv.Close()
		require.NoError(t, h.Close())
	})
	return s
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) { w.code = code; w.ResponseWriter.WriteHeader(code) }

func (s *site) lastStatus(methodPath string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status[methodPath]
}

// screenshot writes a full-page screenshot of the current page.
func screenshot(t *testing.T, b *browser, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		dir = "screenshots"
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ctx, cancel := context.WithTimeout(b.ctx, patience)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: a PNG, lossless
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

func TestDashboardInABrowser(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	emulator := azuritetest.Start(t, nil)
	f := newFixture(t, emulator.ConnectionString(0))

	t.Run("read-only", func(t *testing.T) {
		s := newSite(t, &dashboard.Options{
			Sources:     []azdispatch.Source{f.orders, f.set},
			CacheFor:    time.Second,
			Refresh:     time.Second, // so that the script's refresh runs while the test looks
			TargetAge:   time.Minute,
			PricePer10K: 0.004,
		})
		s.h.Register("orders-worker", dashboard.StateFunc(func() azdispatch.State {
			return azdispatch.State{ActiveDequeuers: 2, IdleDequeuers: 1, InFlight: 3, Succeeded: 120, Failed: 4, Poisoned: poisonCount,
				TimeInQueue: azdispatch.Latency{Count: 124, Recent: 124, P50: time.Second, P99: 4 * time.Second, Max: 6 * time.Second}}
		}))
		b.takeProblems()

		// 1. The page loads with the security headers, and logs nothing.
		b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS("table.data")))
		hd := b.documentHeaders()
		assert.Contains(t, hd["content-security-policy"], "default-src 'none'")
		assert.Contains(t, hd["content-security-policy"], "script-src 'self'")
		assert.Equal(t, "nosniff", hd["x-content-type-options"])
		assert.Equal(t, "no-referrer", hd["referrer-policy"])
		assert.Equal(t, "no-store", hd["cache-control"])
		// The script runs (it shows the pause button), and its refresh
		// replaces the content in place at least once.
		b.waitTrue(t, `!document.getElementById("refresh").hidden`)
		b.do(t, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("main h1").dataset.old = "1", true`))
			return err
		}))
		b.waitTrue(t, `document.querySelector("main h1").dataset.old === undefined`)

		// 2. Each queue and shard with the depth the library reads.
		for _, q := range append([]azdispatch.Source{f.orders, f.set}, f.shards[0], f.shards[1]) {
			want := f.depth(t, q)
			got := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-name=%q] td.depth').textContent.trim()`, q.Name()))
			assert.Equal(t, fmt.Sprint(want), got, q.Name())
		}
		s.checkLinks(t, b)
		got := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-name=%q] td.poison').textContent.trim()`, f.orders.Name()))
		assert.Equal(t, fmt.Sprint(poisonCount), got)
		screenshot(t, b, "overview")

		// 4. Read-only: no action, and a forged POST from the page itself
		// (same origin, so past the cross-origin check) is refused.
		b.do(t, chromedp.Navigate(s.url+"poison"), chromedp.WaitVisible(chromedp.CSS("#poison-table")))
		assert.Equal(t, 0, eval[int](t, b, `document.querySelectorAll('form[action="act"], button.requeue, button.purge, a.button').length`))
		status := eval[int](t, b, `fetch("act", {method: "POST", body: new URLSearchParams({do: "purge-all", confirm: "yes"})}).then(r => r.status)`)
		assert.Equal(t, http.StatusForbidden, status)
		assert.Equal(t, poisonCount, f.depth(t, f.orders.PoisonQueue()), "nothing deleted")
		b.takeProblems() // the refusal's 403, logged as a failed load: expected
		screenshot(t, b, "poison")

		for _, page := range []string{"payloads", "schedules", "latency", "listeners", "cost"} {
			b.do(t, chromedp.Navigate(s.url+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
			s.checkLinks(t, b)
			screenshot(t, b, page)
		}
		b.do(t, chromedp.Navigate(s.url+"poison?reveal=1"), chromedp.WaitVisible(chromedp.CSS("td.body pre")))
		screenshot(t, b, "poison-revealed")
		// 1 again: no console error, exception or CSP violation on any page.
		assert.Empty(t, b.takeProblems())
		s.checkPaths(t)
	})

	t.Run("write", func(t *testing.T) {
		s := newSite(t, &dashboard.Options{
			Sources:  []azdispatch.Source{f.orders, f.set},
			CacheFor: time.Second,
			Refresh:  -1, // nothing moves under the clicks
			Write:    true,
		})
		b.takeProblems()
		b.do(t, chromedp.Navigate(s.url+"poison"), chromedp.WaitVisible(chromedp.CSS("#poison-table")))

		// 3. N rows, decoded.
		rows := `document.querySelectorAll("tr.envelope").length`
		assert.Equal(t, poisonCount, eval[int](t, b, rows))
		assert.Contains(t, eval[string](t, b, `document.querySelector("tr.envelope th.reason").textContent`), "refused: the order has no address")
		assert.Equal(t, f.orders.Name(), eval[string](t, b, `document.querySelector("tr.envelope td").firstChild.textContent`))

		// 4. A cross-origin POST is refused in write mode too: a page
		// elsewhere (localhost, not 127.0.0.1: another site) submits a form
		// to the dashboard.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form method="post" action="%sact"><input name="do" value="purge-all"><input name="confirm" value="yes"></form><script>document.forms[0].submit()</script>`, s.url)
		}))
		defer evil.Close()
		_, port, err := net.SplitHostPort(evil.Listener.Addr().String())
		require.NoError(t, err)
		b.do(t, chromedp.Navigate("http://localhost:"+port+"/"))
		b.waitTrue(t, `location.pathname.endsWith("/act")`)
		assert.Equal(t, http.StatusForbidden, s.lastStatus("POST "+prefix+"act"))
		assert.Equal(t, poisonCount, f.depth(t, f.orders.PoisonQueue()), "nothing deleted")
		b.takeProblems() // the refusal's 403 is logged as a failed load: expected

		// 5. Tab reaches an action, and Enter opens its confirmation.
		b.do(t, chromedp.Navigate(s.url+"poison"), chromedp.WaitVisible(chromedp.CSS("#poison-table")))
		s.checkLinks(t, b)
		reached := false
		for range 80 {
			b.do(t, chromedp.KeyEvent(kb.Tab))
			if eval[bool](t, b, `document.activeElement !== null && document.activeElement.matches("button.requeue")`) {
				reached = true
				break
			}
		}
		require.True(t, reached, "Tab never reached a requeue button")
		target := eval[string](t, b, `document.activeElement.form.querySelector('[name="id"]').value`)
		b.do(t, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
		screenshot(t, b, "confirm")

		// 3. Requeue it through the confirmation: N−1 rows, and the message
		// back in its queue, as the library reads it.
		b.do(t, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
		b.waitTrue(t, fmt.Sprintf(`%s === %d`, rows, poisonCount-1))
		assert.Equal(t, 0, eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('tr.envelope[data-id=%q]').length`, target)))
		assert.Equal(t, poisonCount-1, f.depth(t, f.orders.PoisonQueue()))
		back, err := f.orders.Peek(context.Background(), azdispatch.MaxBatch)
		require.NoError(t, err)
		require.Len(t, back, 1)
		assert.Contains(t, back[0].Text, `"email":"customer`)

		// "Requeue all matching" moves the rest, as a job with progress.
		b.do(t, chromedp.Click(chromedp.CSS(`a.button[href^="confirm?do=requeue-all"]`)), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
		b.do(t, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("progress")))
		// The jobs page refreshes itself while a job runs.
		b.waitTrue(t, `(() => { const r = document.querySelector("tr[data-state]"); return r !== null && r.dataset.state === "done"; })()`)
		assert.Contains(t, eval[string](t, b, `document.querySelector("tr[data-state] td.result").textContent`), fmt.Sprintf("%d requeued", poisonCount-1))
		screenshot(t, b, "jobs")
		assert.Equal(t, 0, f.depth(t, f.orders.PoisonQueue()))
		assert.Equal(t, poisonCount, f.depth(t, f.orders))
		b.do(t, chromedp.Navigate(s.url+"poison"), chromedp.WaitVisible(chromedp.CSS("#poison-table")))
		assert.Equal(t, 0, eval[int](t, b, rows))

		// A test message, sent from the overview.
		b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS("form.send")))
		screenshot(t, b, "overview-write")
		b.do(t, chromedp.SendKeys(chromedp.CSS("form.send textarea"), `{"order":"test"}`), // no default text
			chromedp.Click(chromedp.CSS(`form.send button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
		assert.Equal(t, poisonCount+1, f.depth(t, f.orders))
		assert.Empty(t, b.takeProblems())
		s.checkPaths(t)
	})
}

// checkPaths checks that every request the browser made (pages, assets,
// forms, the script's refreshes) stayed under the prefix, and that every
// URL in the page resolves under it.
func (s *site) checkPaths(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.paths)
	for _, p := range s.paths {
		assert.True(t, strings.HasPrefix(p, prefix), "a request escaped the prefix: %s", p)
	}
}

// checkLinks checks that every URL of the current page resolves under the
// dashboard's prefix.
func (s *site) checkLinks(t *testing.T, b *browser) {
	t.Helper()
	urls := resolvedURLs(t, b)
	require.NotEmpty(t, urls)
	for _, u := range urls {
		assert.True(t, strings.HasPrefix(u, s.url), "%s is not under %s", u, s.url)
	}
}
