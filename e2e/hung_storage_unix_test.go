//go:build unix

package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// hungPageBound is how long a page may take when storage does not
// answer: its readings stop at 5 s (they took 30), and the rest is room
// for a loaded machine.
const hungPageBound = 15 * time.Second

// With the storage account hung (the emulator stopped: it takes
// connections and answers nothing), every page answers within
// hungPageBound, and the pages that list say why they show nothing.
func TestEveryPageAnswersWhileStorageHangs(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	emulator := azuritetest.Start(t, nil)
	f := newFixture(t, emulator.ConnectionString(0))
	s := newSite(t, &dashboard.Options{
		Sources:  []azdispatch.Source{f.orders, f.set},
		CacheFor: time.Second,
		Refresh:  -1,
		Write:    true,
	})
	require.NoError(t, emulator.Pause())
	t.Cleanup(func() { assert.NoError(t, emulator.Resume()) }) // before the site closes: its readings end
	time.Sleep(1100 * time.Millisecond)                        // past any reading cached before the pause

	for _, page := range []string{"", "poison", "schedules", "payloads", "latency", "listeners", "cost", "jobs", "confirm?do=purge-all"} {
		start := time.Now()
		b.do(t, chromedp.Navigate(s.url+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		took := time.Since(start)
		assert.Less(t, took, hungPageBound, "page %q", page)
		switch page {
		case "poison", "schedules":
			assert.Contains(t, eval[string](t, b, `document.querySelector("main").textContent`), "no answer within 5 s", "page %q says why", page)
		case "payloads":
			assert.Contains(t, eval[string](t, b, `document.querySelector("main").textContent`), "Not read", "page %q says why", page)
		}
		t.Logf("%q answered in %v", page, took.Round(time.Millisecond))
	}
	screenshot(t, b, "hung-confirm")
	b.takeProblems()
}
