package azdispatch_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/endpoint"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// hangFor is how long the hung-account tests hold one account silent. The
// suite uses 12 s; -hang-for=60s is the length of an outage the issue
// measured.
var hangFor = flag.Duration("hang-for", 12*time.Second, "how long the hung-account tests hold one account silent")

// hangReport is what a hung-account run measured.
type hangReport struct {
	sends, failed    int
	slowestSend      time.Duration
	handled, missing int
	duplicates       int
	healthyP99       time.Duration // time in queue on the healthy account's shards, sent during the hang
	healthyCount     int
	namedInHealth    time.Duration // from the hang until Health named a hung shard
	namedInReadiness time.Duration
	namedInDashboard time.Duration
	slowestPage      time.Duration
}

// runHungAccount feeds a 4-shard queue over two accounts, the second of
// which hang() makes silent for hangFor (unhang() ends it), at 10 sends a
// second, each with a 5 s deadline, while a listener handles everything,
// and a readiness probe and a dashboard are asked every 200 ms for what
// they say of the shards. It returns what it measured.
func runHungAccount(t *testing.T, healthy, hung *azdispatch.Account, hang, unhang func()) hangReport {
	t.Helper()
	ctx := context.Background()
	base := fmt.Sprintf("hang%d", time.Now().UnixNano()%1_000_000_000)
	shards, err := azdispatch.AccountShards(base, 4, healthy, hung)
	require.NoError(t, err)
	sq, err := azdispatch.NewShardedQueue("orders", shards, nil)
	require.NoError(t, err)
	require.NoError(t, sq.Create(ctx))
	onHung := func(queue string) bool { return queue == base+"-1" || queue == base+"-3" }

	var mu sync.Mutex
	handled := map[string]int{}
	var healthyWaits []time.Duration
	var hangStart, hangEnd atomic.Int64 // Unix nanoseconds
	l, err := azdispatch.NewListener(sq, func(_ context.Context, m *azdispatch.Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		handled[m.Body]++
		if handled[m.Body] == 1 && !onHung(m.Queue) {
			sent := m.InsertedAt.UnixNano()
			if sent >= hangStart.Load()-int64(time.Second) && (hangEnd.Load() == 0 || sent <= hangEnd.Load()) {
				healthyWaits = append(healthyWaits, m.TimeInQueue)
			}
		}
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, time.Second)}})
	require.NoError(t, err)
	stop := running(t, l)

	health := endpoint.NewHealth(nil)
	health.Add("orders", l)
	dash, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{sq}, CacheFor: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dash.Close() })

	var rep hangReport
	var sendMu sync.Mutex
	var ids []string
	var feed sync.WaitGroup
	feeding := make(chan struct{})
	pub, err := azdispatch.NewPublisher[string](sq, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	feed.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var sends sync.WaitGroup
		defer sends.Wait()
		for n := 0; ; n++ {
			select {
			case <-feeding:
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("m%05d", n)
			sends.Go(func() {
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				start := time.Now()
				_, err := pub.Send(sctx, id)
				took := time.Since(start)
				sendMu.Lock()
				defer sendMu.Unlock()
				rep.sends++
				rep.slowestSend = max(rep.slowestSend, took)
				if err != nil {
					rep.failed++
					t.Logf("send %s failed after %v: %v", id, took, err)
					return
				}
				ids = append(ids, id)
			})
		}
	})

	time.Sleep(2 * time.Second)
	hangStart.Store(time.Now().UnixNano())
	hang()
	began := time.Now()
	named := func(d *time.Duration, yes bool) {
		if yes && *d == 0 {
			*d = time.Since(began)
		}
	}
	// The probes and the page are asked apart, so that a slow page does
	// not delay the probes' answers.
	var watching sync.WaitGroup
	watching.Go(func() {
		for time.Since(began) < *hangFor {
			named(&rep.namedInHealth, slices.ContainsFunc(sq.Health(), func(h azdispatch.ShardHealth) bool { return !h.Healthy && onHung(h.Shard) }))
			rec := httptest.NewRecorder()
			health.Readiness().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			named(&rep.namedInReadiness, rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), `\"`+base+`-`))
			time.Sleep(50 * time.Millisecond)
		}
	})
	watching.Go(func() {
		for time.Since(began) < *hangFor {
			start := time.Now()
			rec := httptest.NewRecorder()
			dash.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			rep.slowestPage = max(rep.slowestPage, time.Since(start))
			body, _ := io.ReadAll(rec.Body)
			named(&rep.namedInDashboard, strings.Contains(string(body), "out since") && (strings.Contains(string(body), base+"-1") || strings.Contains(string(body), base+"-3")))
			time.Sleep(200 * time.Millisecond)
		}
	})
	watching.Wait()
	unhang()
	hangEnd.Store(time.Now().UnixNano())
	time.Sleep(2 * time.Second)
	close(feeding)
	feed.Wait()

	sendMu.Lock()
	sent := slices.Clone(ids)
	sendMu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		rep.missing = 0
		for _, id := range sent {
			if handled[id] == 0 {
				rep.missing++
			}
		}
		mu.Unlock()
		if rep.missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	for _, n := range handled {
		rep.handled++
		rep.duplicates += n - 1
	}
	slices.Sort(healthyWaits)
	rep.healthyCount = len(healthyWaits)
	if n := len(healthyWaits); n > 0 {
		rep.healthyP99 = healthyWaits[min(n-1, n*99/100)]
	}
	t.Logf("hung for %v: %d sends, %d failed, slowest %v; %d handled, %d missing, %d duplicates; healthy shards' p99 time in queue %v over %d messages; "+
		"named by Health after %v, readiness after %v, the dashboard after %v (slowest page %v)",
		*hangFor, rep.sends, rep.failed, rep.slowestSend.Round(time.Millisecond), rep.handled, rep.missing, rep.duplicates,
		rep.healthyP99, rep.healthyCount, rep.namedInHealth.Round(time.Millisecond), rep.namedInReadiness.Round(time.Millisecond),
		rep.namedInDashboard.Round(time.Millisecond), rep.slowestPage.Round(time.Millisecond))
	return rep
}

// checkHungAccount asserts what a sharded queue promises with one account
// silent: every send within its deadline, through a healthy shard; nothing
// lost; the healthy shards' messages on time; and the silent shards named
// within 10 s by Health, the readiness probe and the dashboard, whose page
// stays quick. (A send without a deadline took 128 s; with 5 s, half of
// them failed; Health called every shard healthy, readiness stayed silent,
// the dashboard said "healthy" and took 31 s; messages on the healthy
// shards waited 40-53 s.)
func checkHungAccount(t *testing.T, rep hangReport) {
	t.Helper()
	assert.Zero(t, rep.failed, "every send succeeds through a healthy shard")
	assert.Less(t, rep.slowestSend, 5*time.Second, "within its deadline")
	assert.Zero(t, rep.missing, "nothing lost")
	assert.Positive(t, rep.healthyCount)
	assert.Less(t, rep.healthyP99, 5*time.Second, "the healthy shards are not held up")
	for what, d := range map[string]time.Duration{"Health": rep.namedInHealth, "readiness": rep.namedInReadiness, "the dashboard": rep.namedInDashboard} {
		assert.Positive(t, d, "%s never named the hung shard", what)
		assert.Less(t, d, 10*time.Second, "%s named the hung shard late", what)
	}
	assert.Less(t, rep.slowestPage, 8*time.Second, "the dashboard's page is bounded")
}

// hangingTransport holds every request to its hosts unanswered while hang
// is set, until the request's context ends: a blackholed connection.
type hangingTransport struct {
	next  policy.Transporter
	hosts []string
	hang  atomic.Bool
}

func (h *hangingTransport) Do(req *http.Request) (*http.Response, error) {
	if h.hang.Load() && slices.Contains(h.hosts, req.URL.Host) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return h.next.Do(req)
}

// A sharded queue over two accounts, one of which stops answering (its
// requests hang, as behind a blackholed connection), routes around it:
// see checkHungAccount. The hang here is a transport's; on Unix,
// TestAShardedQueueRoutesAroundAPausedEmulator stops a real emulator.
func TestAShardedQueueRoutesAroundAnAccountThatHangs(t *testing.T) {
	azurite.SkipUnlessLong(t)
	t.Parallel()
	cs := azdispatch.EmulatorConnectionString(t)
	healthy, err := azdispatch.NewAccountFromConnectionString(cs, nil)
	require.NoError(t, err)
	spare := spareEmulator(t)
	tr := &hangingTransport{next: http.DefaultClient}
	hung, err := azdispatch.NewAccountFromConnectionString(spare.ConnectionString(), &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{Transport: tr}},
	})
	require.NoError(t, err)
	for _, u := range []string{spare.QueueEndpoint(), spare.BlobEndpoint()} {
		tr.hosts = append(tr.hosts, hostOf(t, u))
	}
	rep := runHungAccount(t, healthy, hung, func() { tr.hang.Store(true) }, func() { tr.hang.Store(false) })
	checkHungAccount(t, rep)
}

// spareEmulator starts an emulator of the test's own, for an account that
// the test makes hang.
func spareEmulator(t *testing.T) *azurite.Instance {
	t.Helper()
	inst, err := azurite.Start(context.Background(), &azurite.Options{Fresh: true})
	require.NoError(t, err, azurite.HowTo)
	t.Cleanup(func() { _ = inst.Kill() })
	return inst
}

// hostOf is the host (and port) of an endpoint URL.
func hostOf(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	return u.Host
}
