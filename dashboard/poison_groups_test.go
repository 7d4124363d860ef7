package dashboard_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Reasons that differ only in a number make one group, named by their
// shape, with its count and example reasons; its link lists them, and the
// confirmation of a bulk action over it says how many match.
func TestThePoisonPageGroupsReasonsByShape(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	for i, r := range []string{"payment declined for order 17", "payment declined for order 18", "payment declined for order 4711", "address missing"} {
		envelope(t, q, azdispatch.PoisonEnvelope{Queue: "orders", MessageID: "m" + string(rune('a'+i)), Reason: r}, "{}")
	}
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, body := get(t, srv, "poison")
	groups := regexp.MustCompile(`(?s)<tr class="group">.*?</tr>`).FindAllString(body, -1)
	require.Len(t, groups, 2, "two shapes")
	first := groups[0]
	assert.Contains(t, first, "payment declined for order &lt;n&gt;")
	assert.Contains(t, first, `<td class="num count">3</td>`)
	for _, n := range []string{"17", "18", "4711"} {
		assert.Contains(t, first, "payment declined for order "+n, "an example")
	}
	m := regexp.MustCompile(`<a href="([^"]*)"><code class="shape">payment`).FindStringSubmatch(first)
	require.NotNil(t, m)
	href := html.UnescapeString(m[1])
	_, _, body = get(t, srv, href)
	assert.ElementsMatch(t, []string{"ma", "mb", "mc"}, ids(body), "the group's link lists the group")

	u, err := url.Parse(href)
	require.NoError(t, err)
	_, _, body = get(t, srv, "confirm?do=purge-all&reason="+url.QueryEscape(u.Query().Get("reason")))
	assert.Contains(t, body, "3 messages match")
}

// A message poisoned, requeued from the dashboard and poisoned again shows
// the ID it had before on the poison page.
func TestThePoisonPageNamesARequeuedMessagesEarlierID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("orders", nil)
	// With metadata, as a publisher with a middleware that sets some (or
	// otelazdispatch's trace context) sends it: the line that Requeue adds
	// the earlier ID to.
	_, err := q.Send(ctx, wire.MetaMagic+"{\"tenant\":\"contoso\"}\n{\"order\":1}", nil)
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[map[string]any]) error {
		return azdispatch.Permanent(errors.New("refused: bad order"))
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 20*time.Millisecond)}, DrainTimeout: time.Second})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, func() bool { return l.State().Poisoned == 1 }, 30*time.Second, 10*time.Millisecond)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true, CacheFor: time.Second})
	_, _, body := get(t, srv, "poison")
	first := ids(body)
	require.Len(t, first, 1)
	assert.NotContains(t, body, "requeued before as")
	status, _, _ := post(t, srv, url.Values{"do": {"requeue"}, "confirm": {"yes"}, "pq": {"orders-poison"}, "id": {first[0]}, "batch": {""}, "item": {"0"}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Eventually(t, func() bool { return l.State().Poisoned == 2 }, 30*time.Second, 10*time.Millisecond)

	require.Eventually(t, func() bool {
		_, _, body = get(t, srv, "poison")
		return strings.Contains(body, "requeued before as")
	}, 30*time.Second, 100*time.Millisecond)
	second := ids(body)
	require.Len(t, second, 1)
	assert.NotEqual(t, first[0], second[0], "a new message")
	assert.Contains(t, body, `<span class="earlier-id">`+first[0]+`</span>`)
}
