package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// movedClock is the dashboard's clock, moved by the test: a cost window of
// minutes without waiting for them.
type movedClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *movedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }

func (c *movedClock) add(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

// costRowsWithin is a script that is true when every row of the cost
// table, the total included, shows the dashboard's count within All's.
const costRowsWithin = `[...document.querySelectorAll("#cost-table tr[data-kind]")].every(r =>
	Number(r.querySelector("td.own").textContent) <= Number(r.querySelector("td.all").textContent))`

// The user trial's items on the cost page, the test send and two accounts
// of one name, in a browser: a sharded queue over two Azurite processes
// that serve the same account name, and a queue beside it.
func TestCostSendAndHostsInABrowser(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	ctx := context.Background()
	var accts []*azdispatch.Account
	for range 2 {
		emulator := azuritetest.Start(t, nil)
		a, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
		require.NoError(t, err)
		accts = append(accts, a)
	}
	require.Equal(t, accts[0].Name(), accts[1].Name(), "two emulators, one account name")
	orders, err := accts[0].Queue(unique("orders"))
	require.NoError(t, err)
	require.NoError(t, orders.Create(ctx))
	base := unique("hosts")
	shards, err := azdispatch.AccountShards(base, 2, accts...)
	require.NoError(t, err)
	for _, sh := range shards {
		require.NoError(t, sh.(*azdispatch.Queue).Create(ctx))
	}
	set, err := azdispatch.NewShardedQueue(base, shards, nil)
	require.NoError(t, err)
	clock := &movedClock{}
	s := newSite(t, &dashboard.Options{
		Sources:     []azdispatch.Source{orders, set},
		Write:       true,
		Refresh:     -1, // nothing moves under the test
		PricePer10K: 0.004,
		Now:         clock.Now,
	})
	b.takeProblems()

	t.Run("cost", func(t *testing.T) {
		// A reading of the overview, the service's own work, and the cost
		// page a few seconds later (by the dashboard's clock).
		b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS("table.data")))
		for i := range 5 {
			_, err := orders.Send(ctx, fmt.Sprintf(`{"order":%d}`, i), nil)
			require.NoError(t, err)
		}
		clock.add(3 * time.Second)
		b.do(t, chromedp.Navigate(s.url+"cost"), chromedp.WaitVisible(chromedp.CSS("#cost-table")))
		assert.True(t, eval[bool](t, b, costRowsWithin), "the dashboard's column is within All on every row")
		assert.True(t, eval[bool](t, b, `!!document.querySelector("#rates-pending") && document.querySelector("#rates-pending").getClientRects().length > 0`),
			"the page says why there is no rate yet")
		assert.True(t, eval[bool](t, b, `[...document.querySelectorAll("#cost-table td.all-hour, #cost-table td.own-hour, #cost-table td.all-price, #cost-table td.own-price")].every(c => c.textContent.trim() === "—")`),
			"no rate per hour, nor price, from a window of seconds")
		assert.GreaterOrEqual(t, eval[int](t, b, `Number(document.querySelector('#cost-table tr[data-kind="send"] td.all').textContent)`), 5,
			"the service's sends are in All")
		assert.Equal(t, 0, eval[int](t, b, `Number(document.querySelector('#cost-table tr[data-kind="send"] td.own').textContent)`),
			"and not the dashboard's")
		assert.Contains(t, eval[string](t, b, `document.querySelector("#cost-table caption").textContent`), accts[0].Name()+" at "+accts[0].Host())
		screenshot(t, b, "cost-short-window")

		// Minutes later, and another reading: rates per hour, and still
		// the dashboard within All.
		clock.add(2 * time.Minute)
		b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS("table.data")))
		b.do(t, chromedp.Navigate(s.url+"cost"), chromedp.WaitVisible(chromedp.CSS("#cost-table")))
		assert.True(t, eval[bool](t, b, costRowsWithin))
		assert.False(t, eval[bool](t, b, `!!document.querySelector("#rates-pending")`))
		assert.NotEqual(t, "—", eval[string](t, b, `document.querySelector('#cost-table tr[data-kind="total"] td.all-hour').textContent.trim()`))
		assert.Positive(t, eval[int](t, b, `Number(document.querySelector('#cost-table tr[data-kind="depth"] td.own').textContent)`),
			"the dashboard's depth requests are counted")
		screenshot(t, b, "cost-rated")
		s.checkLinks(t, b)
	})

	t.Run("hosts", func(t *testing.T) {
		b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS("table.data")))
		for i, sh := range shards {
			host := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-name=%q]').dataset.host`, sh.Name()))
			assert.Equal(t, accts[i].Host(), host, "shard %d", i)
			where := eval[string](t, b, fmt.Sprintf(`document.querySelector('tr[data-name=%q] .where').innerText`, sh.Name()))
			assert.Equal(t, "account "+accts[i].Name()+" at "+accts[i].Host(), where)
		}
		hosts := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll('tr[data-name=%q][data-host]')].map(r => r.dataset.host)`, accts[0].Name()))
		assert.ElementsMatch(t, []string{accts[0].Host(), accts[1].Host()}, hosts, "two account rows of one name, two hosts")
		assert.False(t, eval[bool](t, b, `document.body.innerText.includes("http://")`), "a host, never a URL")
		screenshot(t, b, "overview-hosts")
	})

	t.Run("send", func(t *testing.T) {
		before := depthOf(t, orders)
		b.do(t, chromedp.Navigate(s.url), chromedp.WaitVisible(chromedp.CSS("form.send")))
		assert.Equal(t, "", eval[string](t, b, `document.querySelector("form.send textarea").value`), "no default text")
		assert.True(t, eval[bool](t, b, `document.querySelector("form.send textarea").required`))
		assert.True(t, eval[bool](t, b, `document.getElementById("send-warning").getClientRects().length > 0`), "the warning is shown")
		assert.Contains(t, eval[string](t, b, `document.getElementById("send-warning").innerText`),
			"The listener's handler will receive it and process it like any other message")
		assert.Equal(t, "send-warning", eval[string](t, b, `document.querySelector("form.send textarea").getAttribute("aria-describedby")`))

		// Empty, the browser does not send it.
		b.do(t, chromedp.Click(chromedp.CSS(`form.send button[type="submit"]`)))
		assert.False(t, eval[bool](t, b, `document.querySelector("form.send").checkValidity()`))
		assert.Zero(t, s.lastStatus("POST "+prefix+"act"), "nothing was posted")
		// Posted blank anyway (the page's own origin), the server refuses it.
		status := eval[int](t, b, `fetch("act", {method: "POST", body: new URLSearchParams({do: "send", queue: document.querySelector("form.send select").value, text: "  "})}).then(r => r.status)`)
		assert.Equal(t, http.StatusBadRequest, status)
		b.takeProblems() // the refusal's 400, logged as a failed load: expected
		assert.Equal(t, before, depthOf(t, orders), "nothing was sent")

		// With a text, it goes.
		b.do(t, chromedp.SendKeys(chromedp.CSS("form.send textarea"), `{"order":"test from the dashboard"}`),
			chromedp.Click(chromedp.CSS(`form.send button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
		assert.Contains(t, eval[string](t, b, `document.querySelector("p.notice").innerText`), "process it like any other message")
		assert.Equal(t, before+1, depthOf(t, orders))
		screenshot(t, b, "overview-send")
	})
	assert.Empty(t, b.takeProblems())
	s.checkPaths(t)
}

// depthOf is q's depth, as the library reads it.
func depthOf(t *testing.T, q azdispatch.Source) int {
	t.Helper()
	d, err := q.Depth(context.Background())
	require.NoError(t, err)
	return d
}
