package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// recordSchedule runs a scheduler over q until the payload store holds its
// schedule's record (an hourly one: its next time within the hour), then
// stops it, so that nothing sends it later.
func recordSchedule(t *testing.T, q *azdispatch.Queue) {
	t.Helper()
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "e2e"})
	require.NoError(t, err)
	require.NoError(t, s.Add(azdispatch.Schedule[string]{
		Name:  "hourly-report",
		Every: time.Hour,
		Messages: func(context.Context, azdispatch.Occurrence) ([]string, error) {
			return []string{"report"}, nil
		},
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1 && !states[0].Next.IsZero()
	}, time.Minute, 50*time.Millisecond, "the schedule's record")
	cancel()
	require.NoError(t, <-done)
}

// The operator-trial items a browser shows: no page overflows a phone's
// width; the confirmation starts on Cancel and counts the matches;
// revealed bodies sit in a wide box that wraps between words; a schedule
// whose next time is past is flagged; the listeners page tells a stopped
// listener from a running one and says it shows one process.
func TestOperatorTrialPagesInABrowser(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	emulator := azuritetest.Start(t, nil)
	f := newFixture(t, emulator.ConnectionString(0))
	recordSchedule(t, f.orders)

	s := newSite(t, &dashboard.Options{
		Sources:  []azdispatch.Source{f.orders, f.set},
		CacheFor: time.Second,
		Refresh:  -1,
		Write:    true,
		// Three hours on: the hourly schedule, which no scheduler runs
		// any more, is past its next time.
		Now: func() time.Time { return time.Now().Add(3 * time.Hour) },
	})
	s.h.Register("orders-worker", dashboard.StateFunc(func() azdispatch.State {
		return azdispatch.State{ActiveDequeuers: 2, IdleDequeuers: 1, InFlight: 3, Succeeded: 120, Failed: 4, Retried: 4,
			Lost: 1, Released: 2, Wanted: 9, Poisoned: poisonCount}
	}))
	b.takeProblems()

	t.Run("confirmation", func(t *testing.T) {
		b.do(t, chromedp.Navigate(s.url+"confirm?do=purge-all"), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
		assert.False(t, eval[bool](t, b, `document.activeElement.matches("button.danger, button[type=submit]")`),
			"Enter must not take the destructive action")
		b.waitTrue(t, `document.activeElement.matches("a.cancel")`) // the keyboard starts on Cancel (autofocus comes after the load)
		assert.Contains(t, eval[string](t, b, `document.querySelector("p.matching").textContent`),
			fmt.Sprintf("%d messages match", poisonCount))
		screenshot(t, b, "confirm-focus")
	})

	t.Run("revealed bodies", func(t *testing.T) {
		b.do(t, chromedp.Navigate(s.url+"poison?reveal=1&view=raw"), chromedp.WaitVisible(chromedp.CSS("td.body pre")))
		style := eval[map[string]string](t, b, `(() => { const s = getComputedStyle(document.querySelector("td.body pre")); return {wordBreak: s.wordBreak, overflowWrap: s.overflowWrap, overflowX: s.overflowX}; })()`)
		assert.NotEqual(t, "break-all", style["wordBreak"], "no break inside a word")
		assert.NotEqual(t, "anywhere", style["overflowWrap"])
		assert.Equal(t, "auto", style["overflowX"], "what does not fit scrolls")
		assert.GreaterOrEqual(t, eval[int](t, b, `document.querySelector("td.body pre").getBoundingClientRect().width`), 350,
			"a wide box, not a narrow column")
		screenshot(t, b, "poison-revealed-wide")
	})

	t.Run("overdue schedule", func(t *testing.T) {
		b.do(t, chromedp.Navigate(s.url+"schedules"), chromedp.WaitVisible(chromedp.CSS("main h1")))
		assert.Equal(t, 1, eval[int](t, b, `document.querySelectorAll("tr.overdue").length`))
		assert.Contains(t, eval[string](t, b, `document.querySelector("tr.overdue td.next").textContent`), "overdue by")
		assert.True(t, eval[bool](t, b, `document.querySelector("p.overdue-note") !== null`))
		screenshot(t, b, "schedules-overdue")
	})

	t.Run("listeners", func(t *testing.T) {
		b.do(t, chromedp.Navigate(s.url+"listeners"), chromedp.WaitVisible(chromedp.CSS("table.listeners")))
		assert.Contains(t, eval[string](t, b, `document.querySelector("p.scope").textContent`), "OpenTelemetry")
		assert.Equal(t, "running", eval[string](t, b, `document.querySelector('tr[data-name="orders-worker"]').dataset.state`))
		assert.Equal(t, "9", eval[string](t, b, `document.querySelector('tr[data-name="orders-worker"] td.wanted').textContent.trim()`))
		b.do(t, chromedp.Navigate(s.url+"latency"), chromedp.WaitVisible(chromedp.CSS("main h1")))
		assert.Contains(t, eval[string](t, b, `document.querySelector("p.scope").textContent`), "OpenTelemetry")
	})

	t.Run("phone width", func(t *testing.T) {
		b.do(t, chromedp.EmulateViewport(375, 800))
		defer b.do(t, chromedp.EmulateViewport(1280, 900))
		for _, page := range []string{"", "poison", "poison?reveal=1", "poison?reveal=1&view=raw", "payloads", "schedules", "latency", "listeners", "cost", "jobs", "confirm?do=purge-all"} {
			b.do(t, chromedp.Navigate(s.url+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
			sizes := eval[[]int](t, b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`)
			assert.LessOrEqual(t, sizes[0], sizes[1], "page %q overflows a phone's width (%d px wide in %d)", page, sizes[0], sizes[1])
			screenshot(t, b, "phone-"+map[string]string{"": "overview"}[page]+sanitize(page))
		}
	})
	assert.Empty(t, b.takeProblems())
	s.checkPaths(t)
}

// sanitize makes a page's path a file name.
func sanitize(page string) string {
	out := []rune{}
	for _, r := range page {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			out = append(out, r)
		default:
			out = append(out, '_')
		}
	}
	return string(out)
}
