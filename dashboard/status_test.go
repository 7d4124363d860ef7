package dashboard_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// The status page looks up a group by its ID and a tracked message by its
// token: a group's progress with its failed children's reasons, a
// message's state; 404 for one unknown or malformed, 400 for both asked.
// It reads, and changes nothing.
func TestTheStatusPageShowsAGroupAndATrackedMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("status", nil)
	next := memqueue.New("status-next", nil)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	pubNext, err := azdispatch.NewPublisher[string](next, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	then, err := azdispatch.ContinueWith(pubNext, "next")
	require.NoError(t, err)
	g, err := q.PayloadStore().StartGroup(ctx, 3, then, &azdispatch.GroupOptions{ID: "album-7", Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	for i, body := range []string{"ok", "<b>broken</b>", "ok"} {
		_, err := pub.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	tracked, err := pub.SendWith(ctx, "tracked", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	status, _, body := get(t, srv, "status?group=album-7")
	require.Equal(t, 200, status)
	assert.Contains(t, body, "Group album-7: running")
	assert.Contains(t, body, `0 of 3 finished`)
	status, _, body = get(t, srv, "status?token="+tracked.StatusToken)
	require.Equal(t, 200, status)
	assert.Contains(t, body, "<td>pending</td>")

	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "<b>broken</b>" {
			return azdispatch.Permanent(errors.New(`<script>alert("x")</script> cannot be made`))
		}
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 0)},
		Payloads: azdispatch.PayloadOptions{Continue: func(string) (azdispatch.Target, error) { return next, nil }}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { s := l.State(); return s.Succeeded >= 3 && s.Poisoned >= 1 }, time.Minute, 10*time.Millisecond)
	stop()
	require.NoError(t, <-ended)

	status, _, body = get(t, srv, "status?group=album-7")
	require.Equal(t, 200, status)
	assert.Contains(t, body, "Group album-7: complete, failed")
	assert.Contains(t, body, `3 of 3 finished`)
	assert.Contains(t, body, `<td class="num">1</td><td>permanent: &lt;script&gt;`, "the reason, escaped")
	assert.NotContains(t, body, `<script>alert`)
	status, _, body = get(t, srv, "status?token="+tracked.StatusToken)
	require.Equal(t, 200, status)
	assert.Contains(t, body, "<td>succeeded (final)</td>")

	for page, want := range map[string]int{
		"status":             200,
		"status?group=never": 404,
		"status?group=" + url.QueryEscape("../x"):       404,
		"status?token=0123456789abcdef0123456789abcdef": 404,
		"status?token=" + url.QueryEscape("../../x"):    404,
		"status?group=a&token=b":                        400,
	} {
		status, _, _ := get(t, srv, page)
		assert.Equal(t, want, status, page)
	}
}
