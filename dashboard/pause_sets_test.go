package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
)

// A sharded set is paused as one, every shard; each shard shows its own
// pause but offers no button (paused alone, a shard would hold every
// listener of the set). A shard whose write fails is named, the others
// are paused, and the set's row says how many.
func TestPauseAShardedSetAsOne(t *testing.T) {
	t.Parallel()
	s0, s1 := newWatchedQueue("jobs-0"), newWatchedQueue("jobs-1")
	set, err := azdispatch.NewShardedQueue("jobs", []azdispatch.Shard{s0.Queue, s1.Queue}, nil)
	require.NoError(t, err)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{set}, Write: true})

	_, _, body := get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "jobs"), `href="confirm?do=pause&queue=jobs"`)
	for _, shard := range []string{"jobs-0", "jobs-1"} {
		cell := pauseCellOf(t, body, shard)
		assert.Contains(t, cell, "not paused", shard)
		assert.NotContains(t, cell, "confirm?", shard)
	}
	_, _, body = get(t, srv, "confirm?do=pause&queue=jobs")
	assert.Contains(t, body, "Pause sharded set jobs (every one of its 2 shards)?")
	status, _, _ := get(t, srv, "confirm?do=pause&queue=jobs-0")
	assert.Equal(t, http.StatusBadRequest, status, "a shard alone is not paused")

	status, _, _ = post(t, srv, pauseForm("jobs", "15m", "ops"))
	require.Equal(t, http.StatusSeeOther, status)
	for _, q := range []*watchedQueue{s0, s1} {
		assert.Equal(t, "ops", pauseOf(t, q).By, q.Name())
	}
	_, _, body = get(t, srv, "")
	until := pauseOf(t, set).Until.UTC().Format("2006-01-02 15:04:05Z")
	for _, row := range []string{"jobs", "jobs-0", "jobs-1"} {
		assert.Contains(t, pauseCellOf(t, body, row), "paused by ops until "+until, row)
	}
	assert.Contains(t, pauseCellOf(t, body, "jobs"), `href="confirm?do=resume&queue=jobs"`)

	status, _, _ = post(t, srv, url.Values{"do": {"resume"}, "confirm": {"yes"}, "queue": {"jobs"}})
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, set))

	// One shard refuses the write: the page names it, the other is paused.
	s1.fail.Store(true)
	status, _, page := post(t, srv, pauseForm("jobs", "15m", "ops"))
	assert.Equal(t, http.StatusBadGateway, status)
	page = html.UnescapeString(page)
	assert.Contains(t, page, `The pause failed at writing the queue's metadata (Set Queue Metadata): azdispatch: sharded queue "jobs": set metadata on queue "jobs-1": 503 ServerBusy (throttled).`)
	assert.Contains(t, page, "The shards that did not fail are paused")
	s1.fail.Store(false)
	assert.Equal(t, "ops", pauseOf(t, s0).By)
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, s1))
	_, _, body = get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "jobs"), "(1 of 2 shards; the set's listeners hold while any is)")
	assert.Contains(t, pauseCellOf(t, body, "jobs-1"), "not paused")
}

// A queue set's queues are paused each on its own (the set's listeners go
// on with the others); the set's row counts them.
func TestPauseOneQueueOfAQueueSet(t *testing.T) {
	t.Parallel()
	a, b := newWatchedQueue("tenant-a"), newWatchedQueue("tenant-b")
	set, err := azdispatch.NewQueueSet("tenants", []azdispatch.SetMember{{Queue: a.Queue}, {Queue: b.Queue}}, nil)
	require.NoError(t, err)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{set}, Write: true})

	_, _, body := get(t, srv, "")
	assert.NotContains(t, pauseCellOf(t, body, "tenants"), "confirm?", "the set itself is no pause target")
	assert.Contains(t, pauseCellOf(t, body, "tenant-a"), `href="confirm?do=pause&queue=tenant-a"`)
	_, _, body = get(t, srv, "confirm?do=pause&queue=tenant-a")
	assert.Contains(t, body, "Pause queue tenant-a of queue set tenants?")

	status, _, _ := post(t, srv, pauseForm("tenant-a", "24h", "ops"))
	require.Equal(t, http.StatusSeeOther, status)
	st := pauseOf(t, a)
	assert.WithinRange(t, st.Until, st.Since.Add(24*time.Hour), st.Since.Add(24*time.Hour+3*time.Second), "at least the pause asked, to the second")
	assert.Equal(t, azdispatch.PauseState{}, pauseOf(t, b))
	_, _, body = get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "tenants"), "1 of 2 queues paused; the others go on")
	assert.Contains(t, pauseCellOf(t, body, "tenant-a"), "paused by ops until")
	assert.Contains(t, pauseCellOf(t, body, "tenant-b"), "not paused")
}
