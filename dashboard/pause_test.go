package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// opSetMetadata is the write of a memqueue's pause, as its Intercept sees
// it: the Set Queue Metadata of a real queue.
const opSetMetadata azdispatch.Op = "set metadata"

// watchedQueue is a memqueue whose pause writes a test can count and fail.
type watchedQueue struct {
	*memqueue.Queue
	writes atomic.Int64 // pause writes asked for, failed or not
	fail   atomic.Bool  // fail every pause write with 503 ServerBusy
}

func newWatchedQueue(name string) *watchedQueue {
	w := &watchedQueue{}
	w.Queue = memqueue.New(name, &memqueue.Options{Intercept: func(ctx context.Context, queue string, op azdispatch.Op) error {
		if op != opSetMetadata || queue != name {
			return nil
		}
		w.writes.Add(1)
		if w.fail.Load() {
			return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy"}
		}
		return nil
	}})
	return w
}

func pauseOf(t *testing.T, p azdispatch.Pauser) azdispatch.PauseState {
	t.Helper()
	st, err := p.PauseState(context.Background())
	require.NoError(t, err)
	return st
}

// pauseCellOf is the Pause cell of the overview's row name, as text.
func pauseCellOf(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-name="` + regexp.QuoteMeta(name) + `"[^>]*>.*?<td class="pause[^"]*"[^>]*>(.*?)</td>`).FindStringSubmatch(body)
	require.NotNil(t, m, "no row %s with a pause cell", name)
	return html.UnescapeString(m[1])
}

func pauseForm(queue, duration, by string) url.Values {
	return url.Values{"do": {"pause"}, "confirm": {"yes"}, "queue": {queue}, "duration": {duration}, "by": {by}}
}

// The whole round: the overview offers a pause; its confirmation (a GET)
// changes nothing; the POST pauses for the duration chosen, by whom the
// operator said, and the overview says so; the resume goes the same way.
func TestPauseAndResumeAQueueThroughTheConfirmation(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q.Queue}, Write: true})

	_, _, body := get(t, srv, "")
	cell := pauseCellOf(t, body, "orders")
	assert.Contains(t, cell, "not paused")
	assert.Contains(t, cell, `href="confirm?do=pause&queue=orders"`)

	status, _, body := get(t, srv, "confirm?do=pause&queue=orders")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `method="post" action="act"`)
	assert.Contains(t, body, `<input type="hidden" name="do" value="pause">`)
	assert.Contains(t, body, `<input type="hidden" name="queue" value="orders">`)
	assert.Regexp(t, `<select name="duration">.*<option value="1h" selected>1 hour</option>`, body, "an hour by default")
	for _, d := range []string{"15m", "4h", "24h"} {
		assert.Contains(t, body, `<option value="`+d+`"`)
	}
	assert.Contains(t, body, `<input type="text" name="by" value="dashboard" maxlength="256"`)
	assert.Contains(t, body, "By the last reading: not paused.")
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, q), "a confirmation changes nothing")
	assert.Zero(t, q.writes.Load(), "nor writes anything")

	status, hd, _ := post(t, srv, pauseForm("orders", "4h", "  ana: the payment provider is down  "))
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "./?done=paused", hd.Get("Location"))
	st := pauseOf(t, q)
	assert.Equal(t, "ana: the payment provider is down", st.By, "trimmed")
	assert.WithinRange(t, st.Until, st.Since.Add(4*time.Hour), st.Since.Add(4*time.Hour+3*time.Second), "at least the pause asked, to the second")

	_, _, body = get(t, srv, "?done=paused")
	assert.Contains(t, body, "The pause is written")
	cell = pauseCellOf(t, body, "orders")
	assert.Contains(t, cell, "paused by ana: the payment provider is down until "+st.Until.UTC().Format("2006-01-02 15:04:05Z"))
	assert.Contains(t, cell, `href="confirm?do=resume&queue=orders"`)
	assert.NotContains(t, cell, "do=pause")

	_, _, body = get(t, srv, "confirm?do=resume&queue=orders")
	assert.Contains(t, html.UnescapeString(body), "By the last reading: paused by ana: the payment provider is down until")
	assert.Equal(t, st, pauseOf(t, q), "a confirmation changes nothing")

	status, hd, _ = post(t, srv, url.Values{"do": {"resume"}, "confirm": {"yes"}, "queue": {"orders"}})
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "./?done=resumed", hd.Get("Location"))
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, q))
	_, _, body = get(t, srv, "?done=resumed")
	assert.Contains(t, body, "The pause is ended")
	assert.Contains(t, pauseCellOf(t, body, "orders"), "not paused")
}

// A pause posted without its confirmation gets the confirmation, with what
// the form chose already chosen, and changes nothing.
func TestAPausePostedWithoutConfirmationIsAskedFirst(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q.Queue}, Write: true})
	form := pauseForm("orders", "15m", "bo")
	form.Del("confirm")
	status, _, body := post(t, srv, form)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `<option value="15m" selected>`)
	assert.Contains(t, body, `name="by" value="bo"`)
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, q))
	assert.Zero(t, q.writes.Load())
}

func TestAPauseWithoutAByIsTheDashboards(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q.Queue}, Write: true})
	status, _, _ := post(t, srv, pauseForm("orders", "15m", " "))
	require.Equal(t, http.StatusSeeOther, status)
	st := pauseOf(t, q)
	assert.Equal(t, "dashboard", st.By)
	assert.WithinRange(t, st.Until, st.Since.Add(15*time.Minute), st.Since.Add(15*time.Minute+3*time.Second), "at least the pause asked, to the second")
}

// A duration that is not one of the offered few, and a "paused by" a queue
// cannot keep or a page cannot show on one line, are refused, saying why,
// and nothing is written.
func TestAPauseRefusesABadDurationOrBy(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q.Queue}, Write: true})
	cases := []struct {
		name, duration, by, says string
	}{
		{"no duration", "", "ops", "a pause lasts one of 15 minutes, 1 hour, 4 hours, 24 hours"},
		{"another duration", "2h", "ops", "a pause lasts one of"},
		{"a number alone", "24", "ops", "a pause lasts one of"},
		{"a long one", "1000h", "ops", "a pause lasts one of"},
		{"a negative one", "-1h", "ops", "a pause lasts one of"},
		{"by of 257 bytes", "1h", strings.Repeat("x", 257), "holds at most 256 bytes (this one has 257)"},
		{"by of 129 two-byte characters", "1h", strings.Repeat("é", 129), "holds at most 256 bytes (this one has 258)"},
		{"by on two lines", "1h", "ops\nsomeone else", "one line of text"},
		{"by with a NUL", "1h", "ops\x00", "one line of text"},
		{"by not UTF-8", "1h", "ops\xff", "one line of text"},
	}
	for _, c := range cases {
		status, _, body := post(t, srv, pauseForm("orders", c.duration, c.by))
		assert.Equal(t, http.StatusBadRequest, status, c.name)
		assert.Contains(t, html.UnescapeString(body), c.says, c.name)
		assert.Contains(t, body, "Nothing was paused.", c.name)
	}
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, q))
	assert.Zero(t, q.writes.Load(), "nothing written")

	// 256 bytes is the most, and is kept whole.
	by := strings.Repeat("é", 128)
	status, _, _ := post(t, srv, pauseForm("orders", "1h", by))
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, by, pauseOf(t, q).By)
}

func TestACrossOriginPauseIsRefused(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q.Queue}, Write: true})
	for _, do := range []string{"pause", "resume"} {
		form := pauseForm("orders", "1h", "evil")
		form.Set("do", do)
		req, err := http.NewRequest(http.MethodPost, srv.URL+prefix+"/act", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, do)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'", do)
	}
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, q))
	assert.Zero(t, q.writes.Load())
}

// Read-only, the overview shows the pause but offers no button, the
// confirmation no form, and a forged POST is refused.
func TestAReadOnlyDashboardShowsThePauseAndOffersNoAction(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	_, err := q.Pause(context.Background(), time.Hour, &azdispatch.PauseOptions{By: "ops"})
	require.NoError(t, err)
	writes := q.writes.Load()
	for _, opts := range []*dashboard.Options{
		{Sources: []azdispatch.Source{q.Queue}},
		{Sources: []azdispatch.Source{q.Queue}, Write: true, ReadOnly: func(*http.Request) bool { return true }},
	} {
		_, srv := server(t, opts)
		_, _, body := get(t, srv, "")
		cell := pauseCellOf(t, body, "orders")
		assert.Contains(t, cell, "paused by ops until")
		assert.NotContains(t, cell, "confirm?")
		_, _, body = get(t, srv, "confirm?do=resume&queue=orders")
		assert.NotContains(t, body, `action="act"`)
		assert.Contains(t, body, "read-only")
		status, _, _ := post(t, srv, url.Values{"do": {"resume"}, "confirm": {"yes"}, "queue": {"orders"}})
		assert.Equal(t, http.StatusForbidden, status)
	}
	assert.Equal(t, "ops", pauseOf(t, q).By, "still paused")
	assert.Equal(t, writes, q.writes.Load())
}

// Storage that refuses the pause's write: the page says the pause failed
// and why (the request, the queue, the service's answer), and the overview
// shows the queue as it is, not paused.
func TestAPauseThatStorageRefusesSaysWhy(t *testing.T) {
	t.Parallel()
	q := newWatchedQueue("orders")
	q.fail.Store(true)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q.Queue}, Write: true})
	status, _, body := post(t, srv, pauseForm("orders", "1h", "ops"))
	assert.Equal(t, http.StatusBadGateway, status)
	assert.Contains(t, html.UnescapeString(body), `The pause failed at writing the queue's metadata (Set Queue Metadata): set metadata on queue "orders": 503 ServerBusy (throttled).`)
	assert.Equal(t, int64(1), q.writes.Load())
	q.fail.Store(false)
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, q))
	_, _, body = get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "orders"), "not paused")

	_, err := q.Pause(context.Background(), time.Hour, nil)
	require.NoError(t, err)
	q.fail.Store(true)
	status, _, body = post(t, srv, url.Values{"do": {"resume"}, "confirm": {"yes"}, "queue": {"orders"}})
	assert.Equal(t, http.StatusBadGateway, status)
	assert.Contains(t, html.UnescapeString(body), `The resume failed at writing the queue's metadata (Set Queue Metadata): set metadata on queue "orders": 503 ServerBusy (throttled).`)
}

// A pause read that fails shows as not read, with why, beside a depth that
// was read: never as "not paused".
func TestAPauseThatCannotBeReadShowsAsNotRead(t *testing.T) {
	t.Parallel()
	q := pauseUnreadable{memqueue.New("orders", nil)}
	_, err := q.Send(context.Background(), "x", nil)
	require.NoError(t, err)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	_, _, body := get(t, srv, "")
	assert.Regexp(t, `data-name="orders">\s*<th scope="row">orders</th>\s*<td>queue</td>\s*<td class="num depth">1</td>`, body, "the depth is read")
	cell := pauseCellOf(t, body, "orders")
	assert.Contains(t, cell, "—")
	assert.Contains(t, cell, `not read: orders: depth on queue "orders": 403 AuthorizationPermissionMismatch (forbidden)`)
	assert.NotContains(t, cell, "not paused")
}

// pauseUnreadable is a memqueue whose pause cannot be read.
type pauseUnreadable struct{ *memqueue.Queue }

func (q pauseUnreadable) PauseState(context.Context) (azdispatch.PauseState, error) {
	return azdispatch.PauseState{}, &azdispatch.StorageError{Op: azdispatch.OpDepth, Queue: q.Name(),
		StatusCode: http.StatusForbidden, Code: "AuthorizationPermissionMismatch"}
}

// A queue that cannot be paused shows nothing in the column, and a pause
// of it is refused.
func TestAQueueThatCannotBePausedShowsNothing(t *testing.T) {
	t.Parallel()
	q := plainShard{memqueue.New("plain", nil)}
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, body := get(t, srv, "")
	assert.Empty(t, strings.TrimSpace(pauseCellOf(t, body, "plain")))
	status, _, _ := get(t, srv, "confirm?do=pause&queue=plain")
	assert.Equal(t, http.StatusBadRequest, status)
	status, _, _ = post(t, srv, pauseForm("plain", "1h", "ops"))
	assert.Equal(t, http.StatusBadRequest, status)
	status, _, _ = post(t, srv, pauseForm("nowhere", "1h", "ops"))
	assert.Equal(t, http.StatusBadRequest, status)
}

// plainShard is a queue with nothing but the Shard interface: not a Pauser.
type plainShard struct{ azdispatch.Shard }

// The listeners page says a listener holds for a pause, as the listener
// last read it: no request of the dashboard's own.
func TestTheListenersPageShowsAListenersPause(t *testing.T) {
	t.Parallel()
	until := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	h, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{memqueue.New("orders", nil)}})
	h.Register("orders-worker", dashboard.StateFunc(func() azdispatch.State {
		return azdispatch.State{Paused: azdispatch.PauseState{Since: until.Add(-time.Hour), Until: until, By: "ops"}}
	}))
	h.Register("other-worker", dashboard.StateFunc(func() azdispatch.State { return azdispatch.State{} }))
	_, _, body := get(t, srv, "listeners")
	row := regexp.MustCompile(`(?s)<tr data-name="orders-worker".*?</tr>`).FindString(body)
	assert.Contains(t, row, `<span class="sub paused state warn">paused by ops until 2026-11-28 18:00:00Z: receiving nothing</span>`)
	other := regexp.MustCompile(`(?s)<tr data-name="other-worker".*?</tr>`).FindString(body)
	assert.NotContains(t, other, "paused")
	assert.Zero(t, h.Transactions().Total())
}
