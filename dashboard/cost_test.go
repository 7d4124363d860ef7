package dashboard_test

import (
	"context"
	"io"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// manualClock is a clock a test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *manualClock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// costRow is one row of the cost table as the page shows it.
type costRow struct {
	all, own         int64
	allHour, ownHour string
}

var costRowRE = regexp.MustCompile(`<tr data-kind="([^"]+)"[^>]*>.*?<td class="num all">(-?\d+)</td><td class="num all-hour">([^<]*)</td>.*?<td class="num own[^"]*">(-?\d+)</td><td class="num own-hour">([^<]*)</td>`)

// costRows reads the cost table of a page, by kind ("total" included).
func costRows(t *testing.T, body string) map[string]costRow {
	t.Helper()
	out := map[string]costRow{}
	for _, m := range costRowRE.FindAllStringSubmatch(body, -1) {
		all, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		own, err := strconv.ParseInt(m[4], 10, 64)
		require.NoError(t, err)
		out[m[1]] = costRow{all: all, own: own, allHour: m[3], ownHour: m[5]}
	}
	require.Contains(t, out, "total", "the page has a cost table")
	require.Contains(t, out, "depth")
	return out
}

// checkDashboardWithinAll checks that the dashboard's column is a part of
// All on every row and in the total.
func checkDashboardWithinAll(t *testing.T, rows map[string]costRow) {
	t.Helper()
	for kind, r := range rows {
		assert.LessOrEqual(t, r.own, r.all, "%s: the dashboard's requests are a part of all of them", kind)
		assert.GreaterOrEqual(t, r.own, int64(0), kind)
	}
}

// A reading counted in its queue's counter before it was in the
// dashboard's made the cost page say the dashboard made more requests than
// everything that includes it (12 depth requests against 0). Now the
// dashboard's column is never above All, and a window of a few seconds
// shows its counts, not an hourly rate extrapolated from them.
func TestTheCostPageNeverShowsTheDashboardAboveAll(t *testing.T) {
	t.Parallel()
	clock := &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q := memqueue.New("orders", nil)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Now: clock.Now})

	// A reading of the overview (3 requests), then the cost page 2 s later.
	get(t, srv, "")
	clock.add(2 * time.Second)
	send(t, q, 4) // the service's own work, in the same window
	_, _, body := get(t, srv, "cost")
	rows := costRows(t, body)
	checkDashboardWithinAll(t, rows)
	assert.EqualValues(t, 4, rows["send"].all, "the service's sends are in All")
	assert.Zero(t, rows["send"].own, "and not the dashboard's")
	for kind, r := range rows {
		assert.Equal(t, "—", r.allHour, "%s: no hourly rate from a 2 s window", kind)
		assert.Equal(t, "—", r.ownHour, kind)
	}
	assert.Contains(t, body, `id="rates-pending"`)
	assert.Contains(t, body, "over the last 2 s")
	assert.NotContains(t, body, "7200", "4 sends in 2 s are not 7,200 an hour")

	// Past a minute, rates appear, and still the dashboard is within All.
	clock.add(2 * time.Minute)
	get(t, srv, "") // a new reading: the cached one is stale
	send(t, q, 2)
	_, _, body = get(t, srv, "cost")
	rows = costRows(t, body)
	checkDashboardWithinAll(t, rows)
	assert.NotContains(t, body, `id="rates-pending"`)
	assert.NotEqual(t, "—", rows["total"].allHour, "a rate per hour over a window of minutes")
	assert.Positive(t, rows["depth"].own, "the dashboard's depth requests are counted")
	assert.Equal(t, rows["depth"].own, rows["depth"].all, "only the dashboard asked for depths")
}

// Under load (a listener draining the queue, readings taken and pages
// viewed at once, the clock moving), every cost page keeps the dashboard
// within All, kind by kind and in total.
func TestTheDashboardStaysWithinAllUnderConcurrentReadings(t *testing.T) {
	t.Parallel()
	clock := &manualClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	q := memqueue.New("orders", nil)
	h, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Now: clock.Now, CacheFor: time.Second})
	send(t, q, 200)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[[]byte]) error { return nil },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 20*time.Millisecond)}, DrainTimeout: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				clock.add(700 * time.Millisecond)
				// Not get: require must not stop a test from another
				// goroutine.
				resp, err := client().Get(srv.URL + prefix + "/")
				if assert.NoError(t, err) {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	for range 30 {
		_, _, body := get(t, srv, "cost")
		checkDashboardWithinAll(t, costRows(t, body))
	}
	wg.Wait()
	cancel()
	require.NoError(t, <-done)
	_, _, body := get(t, srv, "cost")
	checkDashboardWithinAll(t, costRows(t, body))
	assert.Positive(t, h.Transactions().Depth, "the dashboard's readings were counted")
}

// send puts n messages on q, as a service would.
func send(t *testing.T, q *memqueue.Queue, n int) {
	t.Helper()
	for range n {
		_, err := q.Send(context.Background(), "work", nil)
		require.NoError(t, err)
	}
}
