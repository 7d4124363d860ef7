package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// An operator looks up a group by its ID and a tracked message by its
// token on the status page, in a browser, against Azurite: the group's
// progress with its poisoned child's reason, the message's state; an
// unknown group says so (404). No page logs an error.
func TestStatusPageInABrowser(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	emulator := azuritetest.Start(t, nil)
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue(unique("thumbs"))
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	store, err := account.PayloadStore("")
	require.NoError(t, err)
	then, err := azdispatch.ContinueWith(pub, "index")
	require.NoError(t, err)
	id := unique("album")
	g, err := store.StartGroup(ctx, 3, then, &azdispatch.GroupOptions{ID: id, Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	for i, body := range []string{"a.jpg", "broken.jpg", "c.jpg"} {
		_, err := pub.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	tracked, err := pub.SendWith(ctx, "tracked", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "broken.jpg" {
			return azdispatch.Permanent(errors.New("not an image"))
		}
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { s := l.State(); return s.Succeeded >= 4 && s.Poisoned >= 1 }, time.Minute, 50*time.Millisecond)
	stop()
	require.NoError(t, <-ended)

	s := newSite(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Refresh: -1})
	b.takeProblems()
	b.do(t, chromedp.Navigate(s.url+"status"), chromedp.WaitVisible(chromedp.CSS("input#group")),
		chromedp.SendKeys(chromedp.CSS("input#group"), id), chromedp.Submit(chromedp.CSS("input#group")),
		chromedp.WaitVisible(chromedp.CSS("table#group-status")))
	assert.Contains(t, eval[string](t, b, `document.querySelector("table#group-status caption").innerText`), "complete, failed")
	assert.Contains(t, eval[string](t, b, `document.querySelector("table#group-status").innerText`), "3 of 3 finished")
	assert.Contains(t, eval[string](t, b, `document.querySelector("table#group-failures").innerText`), "not an image")
	assert.Equal(t, "Status", eval[string](t, b, `document.querySelector('nav a[aria-current="page"]').innerText`))
	screenshot(t, b, "status-group")

	b.do(t, chromedp.Navigate(s.url+"status"), chromedp.WaitVisible(chromedp.CSS("input#token")),
		chromedp.SendKeys(chromedp.CSS("input#token"), tracked.StatusToken), chromedp.Submit(chromedp.CSS("input#token")),
		chromedp.WaitVisible(chromedp.CSS("table#message-status")))
	assert.Contains(t, eval[string](t, b, `document.querySelector("table#message-status").innerText`), "succeeded (final)")
	screenshot(t, b, "status-message")
	assert.Empty(t, b.takeProblems())

	b.do(t, chromedp.Navigate(s.url+"status?group=never-started"), chromedp.WaitVisible(chromedp.CSS("p.error")))
	assert.Contains(t, eval[string](t, b, `document.querySelector("p.error").innerText`), "No group never-started")
	assert.Equal(t, 404, s.lastStatus("GET "+prefix+"status"))
}
