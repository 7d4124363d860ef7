package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

var envelopeRow = regexp.MustCompile(`<tr class="envelope" data-id="([^"]+)">`)

func TestPoisonPageShowsEachEnvelopeDecodedWithBodiesHiddenUntilRevealed(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 4)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	_, _, body := get(t, srv, "poison")
	assert.Len(t, envelopeRow.FindAllString(body, -1), 4)
	assert.Contains(t, body, "refused: bad order")
	assert.Contains(t, body, "only the first 32 messages of a queue")
	assert.NotContains(t, body, "@example.com", "bodies hidden by default")

	_, _, body = get(t, srv, "poison?reveal=1")
	assert.Contains(t, body, "person0@example.com")
	assert.Contains(t, body, "&#34;order&#34;: 0", "pretty JSON, through the codec")
	_, _, body = get(t, srv, "poison?reveal=1&view=base64")
	assert.Contains(t, body, "eyJvcmRlciI6MCwi", "base64 of the raw text")

	_, _, body = get(t, srv, "poison?reason=no+such+reason")
	assert.Empty(t, envelopeRow.FindAllString(body, -1))
	_, _, body = get(t, srv, "poison?older=1d")
	assert.Empty(t, envelopeRow.FindAllString(body, -1), "none is a day old")
	_, _, body = get(t, srv, "poison?source=orders&reason=BAD")
	assert.Len(t, envelopeRow.FindAllString(body, -1), 4)
}

func TestRequeueOneThroughItsConfirmation(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 3)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, body := get(t, srv, "poison")
	ids := envelopeRow.FindAllStringSubmatch(body, -1)
	require.Len(t, ids, 3)
	id := ids[0][1]
	form := url.Values{"do": {"requeue"}, "pq": {"orders-poison"}, "id": {id}, "batch": {""}, "item": {"0"}}

	// Unconfirmed, a POST only asks.
	status, _, body := post(t, srv, form)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `name="confirm" value="yes"`)
	assert.Equal(t, 3, depth(t, q.PoisonQueue()))

	form.Set("confirm", "yes")
	status, hd, _ := post(t, srv, form)
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "poison?done=requeued", hd.Get("Location"))
	assert.Equal(t, 2, depth(t, q.PoisonQueue()))
	msgs, err := q.Peek(context.Background(), 32)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	// Back with its text byte for byte: a codec's text alone gets no
	// metadata line (see azdispatch.Requeue).
	assert.Equal(t, `{"order":`, msgs[0].Text[:9])

	_, _, body = get(t, srv, "poison?done=requeued")
	assert.Len(t, envelopeRow.FindAllString(body, -1), 2, "the reading was taken again after the action")
	assert.Contains(t, body, "it is back in its queue")
}

func TestPurgeOne(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 2)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, body := get(t, srv, "poison")
	id := envelopeRow.FindAllStringSubmatch(body, -1)[1][1]
	status, hd, _ := post(t, srv, url.Values{"do": {"purge"}, "pq": {"orders-poison"}, "id": {id}, "item": {"0"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "poison?done=purged", hd.Get("Location"))
	assert.Equal(t, 1, depth(t, q.PoisonQueue()))
	assert.Equal(t, 0, depth(t, q))
}

func TestRequeueAllMatchingRunsAsAJob(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 5)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	status, hd, _ := post(t, srv, url.Values{"do": {"requeue-all"}, "reason": {"bad order"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, status)
	assert.True(t, strings.HasPrefix(hd.Get("Location"), "jobs?done=job-started&id="))
	require.Eventually(t, func() bool {
		_, _, body := get(t, srv, "jobs")
		return strings.Contains(body, `data-state="done"`)
	}, 30*time.Second, 20*time.Millisecond)
	_, _, body := get(t, srv, "jobs")
	assert.Contains(t, body, "5 requeued")
	assert.Equal(t, 0, depth(t, q.PoisonQueue()))
	assert.Equal(t, 5, depth(t, q))
}

func TestCloseStopsARunningJob(t *testing.T) {
	t.Parallel()
	q := poisoned(t, "orders", 3)
	// Its poison queue's receives wait for their context: a job that only
	// Close can end.
	src := &stuckPoison{Queue: q}
	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{src}, Write: true})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	status, _, _ := post(t, srv, url.Values{"do": {"purge-all"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, status)
	_, _, body := get(t, srv, "jobs")
	assert.Contains(t, body, `data-state="running"`)
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not stop the job")
	}
	_, _, body = get(t, srv, "jobs")
	assert.Contains(t, body, "stopped")
	assert.Equal(t, 3, depth(t, q.PoisonQueue()), "nothing deleted")
}

// stuckPoison is a memqueue queue whose poison queue never answers a
// receive before its context ends.
type stuckPoison struct{ *memqueue.Queue }

func (s *stuckPoison) PoisonQueue() azdispatch.Shard { return stuckShard{s.Queue.PoisonQueue()} }

type stuckShard struct{ azdispatch.Shard }

func (stuckShard) Receive(ctx context.Context, _ int, _ time.Duration) ([]*azdispatch.Delivery, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
