package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// stampOf is a time as the dashboard's pages show it.
func stampOf(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// runListener runs a listener on q that counts what it handles, reading
// the queue's pause every 100 ms, until the test ends.
func runListener(t *testing.T, q azdispatch.Source) (*azdispatch.Listener[string], *atomic.Int64) {
	t.Helper()
	handled := new(atomic.Int64)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error {
		handled.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{
		Codec:        azdispatch.Raw(),
		Scaling:      azdispatch.ScalingOptions{ScaleInterval: 100 * time.Millisecond, Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)},
		DrainTimeout: time.Second,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return l, handled
}

// An operator pauses a queue from the overview, through its confirmation,
// for a quarter of an hour and with a reason; the overview says who paused
// it and until when, and a listener on the queue, in this process, holds;
// then the operator resumes it the same way, the overview no longer shows
// a pause, and the listener handles a message again.
func TestPauseAndResumeAQueueInABrowser(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	emulator := azuritetest.Start(t, nil)
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue(unique("payments"))
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))
	l, handled := runListener(t, q)

	s := newSite(t, &dashboard.Options{
		Sources:  []azdispatch.Source{q},
		CacheFor: time.Second,
		Refresh:  -1, // nothing moves under the clicks
		Write:    true,
	})
	s.h.Register("payments-worker", l)
	b.takeProblems()
	row := fmt.Sprintf(`tr[data-name=%q]`, q.Name())
	cell := fmt.Sprintf(`document.querySelector('%s td.pause').innerText`, row)

	// Pause: the overview's button, then its confirmation.
	b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS(row+" a.button.pause")))
	assert.Contains(t, eval[string](t, b, cell), "not paused")
	b.do(t, chromedp.Click(chromedp.CSS(row+" a.button.pause")), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	b.waitTrue(t, `document.activeElement.matches("a.cancel")`) // the keyboard starts on Cancel (autofocus comes after the load)
	assert.Equal(t, "1h", eval[string](t, b, `document.querySelector('form.confirm select[name="duration"]').value`))
	assert.Equal(t, "dashboard", eval[string](t, b, `document.querySelector('form.confirm input[name="by"]').value`))
	assert.Contains(t, eval[string](t, b, `document.querySelector("p.matching").innerText`), "By the last reading: not paused.")
	now, err := q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, azdispatch.PauseState{}, now, "the confirmation changed nothing")
	choose(t, b, `form.confirm select[name="duration"]`, "15m")
	retype(t, b, `form.confirm input[name="by"]`, "ana: the payment provider is down")
	screenshot(t, b, "pause-confirm")
	b.do(t, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))

	now, err = q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ana: the payment provider is down", now.By)
	assert.WithinRange(t, now.Until, now.Since.Add(15*time.Minute), now.Since.Add(15*time.Minute+3*time.Second), "at least the pause asked, to the second")
	assert.Contains(t, eval[string](t, b, cell), "paused by ana: the payment provider is down until "+stampOf(now.Until))
	assert.Contains(t, eval[string](t, b, `document.querySelector("p.notice").innerText`), "The pause is written")
	require.Eventually(t, func() bool { return l.State().Paused.By == now.By }, patience, 20*time.Millisecond,
		"the listener reads the pause and holds")
	screenshot(t, b, "overview-paused")
	// The listeners page shows the listener holding, as it read the pause.
	b.do(t, chromedp.Navigate(s.url+"listeners"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="payments-worker"]`)))
	assert.Contains(t, eval[string](t, b, `document.querySelector('tr[data-name="payments-worker"] .paused').innerText`),
		"paused by ana: the payment provider is down until "+stampOf(now.Until))
	screenshot(t, b, "listeners-paused")

	// Resume, the same way.
	b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS(row+" a.button.resume")))
	b.do(t, chromedp.Click(chromedp.CSS(row+" a.button.resume")), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
	assert.Contains(t, eval[string](t, b, `document.querySelector("p.matching").innerText`), "By the last reading: paused by ana")
	b.do(t, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	assert.Contains(t, eval[string](t, b, cell), "not paused")
	assert.NotContains(t, eval[string](t, b, cell), "paused by")
	assert.True(t, eval[bool](t, b, fmt.Sprintf(`document.querySelector('%s a.button.pause') !== null`, row)))
	now, err = q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, azdispatch.PauseState{}, now)
	require.Eventually(t, func() bool { return l.State().Paused == azdispatch.PauseState{} }, patience, 20*time.Millisecond,
		"the listener reads the resume")
	_, err = q.Send(ctx, "after the resume", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return handled.Load() == 1 }, patience, 20*time.Millisecond, "the listener receives again")
	screenshot(t, b, "overview-resumed")

	assert.Empty(t, b.takeProblems())
	s.checkPaths(t)
}

// choose picks the option of value in the select at sel, as a person does
// with the keyboard: focus it, and move with the arrow keys.
func choose(t *testing.T, b *browser, sel, value string) {
	t.Helper()
	at := eval[[]int](t, b, fmt.Sprintf(`(() => { const s = document.querySelector(%q);
		return [s.selectedIndex, [...s.options].findIndex(o => o.value === %q)]; })()`, sel, value))
	require.GreaterOrEqual(t, at[1], 0, "no option %s", value)
	key := kb.ArrowDown
	if at[1] < at[0] {
		key = kb.ArrowUp
	}
	b.do(t, chromedp.Focus(chromedp.CSS(sel)))
	for range max(at[1]-at[0], at[0]-at[1]) {
		b.do(t, chromedp.KeyEvent(key))
	}
	assert.Equal(t, value, eval[string](t, b, fmt.Sprintf(`document.querySelector(%q).value`, sel)))
}

// retype replaces the text of the field at sel, as a person does: select
// it all, and type over it.
func retype(t *testing.T, b *browser, sel, text string) {
	t.Helper()
	b.do(t, chromedp.Focus(chromedp.CSS(sel)))
	eval[bool](t, b, fmt.Sprintf(`(document.querySelector(%q).select(), true)`, sel))
	b.do(t, chromedp.SendKeys(chromedp.CSS(sel), text))
	assert.Equal(t, text, eval[string](t, b, fmt.Sprintf(`document.querySelector(%q).value`, sel)))
}
