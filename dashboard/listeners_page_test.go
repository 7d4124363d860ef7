package dashboard_test

import (
	"context"
	"errors"
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

// rowOf is the listeners page's row of the listener called name.
func rowOf(body, name string) string {
	m := regexp.MustCompile(`(?s)<tr data-name="` + regexp.QuoteMeta(name) + `".*?</tr>`).FindString(body)
	return m
}

// The listeners page tells a running listener from a stopped one, shows
// its retried, lost and released counts, wanted dequeuers and throughput,
// and says (as the latency page does) that it shows this process only.
func TestTheListenersPageShowsStateCountsAndScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("orders", nil)
	fails := 0
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[map[string]any]) error {
		if fails < 1 {
			fails++
			return errors.New("try again")
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 20*time.Millisecond),
		},
		DrainTimeout: time.Second,
		Retry:        func(int64) time.Duration { return 0 },
	})
	require.NoError(t, err)
	var skew atomic.Int64 // the dashboard's clock runs ahead by this much
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	h, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Now: now})
	h.Register("orders-worker", l)
	h.Register("replica-view", dashboard.StateFunc(func() azdispatch.State {
		return azdispatch.State{Wanted: 7, Lost: 2, Released: 3, Retried: 4, RetriedFor: azdispatch.RetryCounts{Timeout: 4}}
	}))

	_, _, body := get(t, srv, "listeners")
	assert.Contains(t, rowOf(body, "orders-worker"), `data-state="stopped"`, "not run yet")
	assert.Contains(t, body, "One process:")
	assert.Contains(t, body, "OpenTelemetry")
	other := rowOf(body, "replica-view")
	assert.Contains(t, other, `data-state="no dequeuer"`, "a StateFunc cannot tell stopped from idle")
	assert.Contains(t, other, `<td class="num wanted">7</td>`)
	assert.Contains(t, other, `<td class="num lost">2</td>`)
	assert.Contains(t, other, `<td class="num released">3</td>`)
	assert.Contains(t, other, "timeout 4")

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	for range 5 {
		_, err := q.Send(ctx, `{"n":1}`, nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return l.State().Succeeded == 5 }, 30*time.Second, 10*time.Millisecond)
	skew.Store(int64(10 * time.Second)) // a throughput is measured over a second or more
	require.Eventually(t, func() bool {
		_, _, body = get(t, srv, "listeners")
		return strings.Contains(rowOf(body, "orders-worker"), `data-state="idle"`)
	}, 30*time.Second, 20*time.Millisecond, "running, with nothing to do")
	row := rowOf(body, "orders-worker")
	assert.Regexp(t, `<td class="num retried">1`, row)
	assert.Regexp(t, `<td class="num rate">[0-9.]+ /s over `, row)

	cancel()
	require.NoError(t, <-done)
	_, _, body = get(t, srv, "listeners")
	assert.Contains(t, rowOf(body, "orders-worker"), `data-state="stopped"`, "Run returned")

	_, _, body = get(t, srv, "latency")
	assert.Contains(t, body, "One process:")
	assert.Contains(t, body, "OpenTelemetry")
}
