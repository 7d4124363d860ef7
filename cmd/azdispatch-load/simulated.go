package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The simulated scenario drives the real ShardedQueue routing, the real
// Listener and the account limiter's pacing over the in-memory model of
// simshard.go: 3 accounts × 10 queues (a layout for 60,000 messages/s), each queue held to 2,000
// messages/s and each account to 20,000 requests/s. Four variants, each over
// a fresh model:
//
//   - publish: publishers offer 10% more than the model's capacity of 60,000
//     messages/s (every send is one message and one request, so the 30
//     queues' and the 3 accounts' targets agree) through ShardedQueue.Send,
//     with each account's requests paced to its target.
//   - drain: three listeners, each on a third of the shards (Subset), drain
//     a backlog, paced likewise. A processed message costs a delete and 1/32
//     of a receive, so the accounts' 60,000 requests/s allow at most 58,182
//     messages/s.
//   - publish-unpaced and drain-unpaced: the same without pacing, the
//     baseline: the client finds the targets through 503s.
const (
	simAccounts   = 3
	simPerAccount = 10
	simWindow     = 6 * time.Second                                // measured
	simWarmup     = 3 * time.Second                                // before it
	simCapacity   = simAccounts * simPerAccount * simQueueMsgsPerS // 60,000/s
	simOffered    = simCapacity * 11 / 10
	simPublishers = 64
)

// simPayload is small: the model limits requests and messages, not bytes,
// and a smaller body leaves the shared machine's CPU to the code under test.
var simPayload = `{"seq":1,"pad":"` + strings.Repeat("x", 64) + `"}`

// simTiming is how long a simulated run warms up and then measures.
type simTiming struct{ warmup, window time.Duration }

type simRun struct {
	msgsPerS   float64
	maxOverMin float64
	busy       int64
}

func runSimulated(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	variants := []struct {
		name string
		run  func(context.Context, simTiming, bool) (simRun, error)
		pace bool
	}{
		{"publish", simPublish, true}, {"publish-unpaced", simPublish, false},
		{"drain", simDrain, true}, {"drain-unpaced", simDrain, false},
	}
	tm := o.sim
	if tm == (simTiming{}) {
		tm = simTiming{warmup: simWarmup, window: simWindow}
	}
	var recs []record
	for _, v := range variants {
		var rates, spreads []float64
		var busy int64
		for round := range o.rounds {
			r, err := v.run(ctx, tm, v.pace)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", v.name, err)
			}
			fmt.Fprintf(progress, "simulated round %d %-15s %8.0f msgs/s, busiest/idlest shard %.3f, 503s %d\n",
				round+1, v.name, r.msgsPerS, r.maxOverMin, r.busy)
			rates, spreads = append(rates, r.msgsPerS), append(spreads, r.maxOverMin)
			busy += r.busy
		}
		recs = append(recs, record{
			Scenario: "simulated", Variant: v.name, MsgsPerS: median(rates), Runs: rates,
			ShardMaxOverMin: median(spreads), ServerBusy: ptr(busy / int64(max(o.rounds, 1))),
		})
	}
	ceiling := float64(simAccounts*simAccountReqsPerS) / (1 + 1.0/32)
	lines := []string{
		fmt.Sprintf("model: %d accounts × %d queues; %d msgs/s per queue, %d requests/s per account, 503 above; %v per run",
			simAccounts, simPerAccount, simQueueMsgsPerS, simAccountReqsPerS, tm.window),
		fmt.Sprintf("publish: %d msgs/s offered, capacity %d (the queues' and the accounts' combined target): %.2f%% of capacity, paced; %.2f%% unpaced",
			simOffered, simCapacity, 100*recs[0].MsgsPerS/simCapacity, 100*recs[1].MsgsPerS/simCapacity),
		fmt.Sprintf("drain: ceiling %.0f msgs/s (1 + 1/32 requests per message): %.1f%% of it paced, %.1f%% unpaced",
			ceiling, 100*recs[2].MsgsPerS/ceiling, 100*recs[3].MsgsPerS/ceiling),
		"pacing: each account's requests through a rate.Limiter at the account's target (AccountOptions.Limiter)",
		"503s are per run (mean); busiest/idlest compares messages per shard.",
	}
	return recs, lines, nil
}

// simPublish paces publishers at simOffered and measures what the model
// accepts over tm.window, after tm.warmup.
func simPublish(ctx context.Context, tm simTiming, paced bool) (simRun, error) {
	model := newSimModel(simAccounts, simPerAccount, paced)
	sq, err := azdispatch.NewShardedQueue("tasks", model.shards(), nil)
	if err != nil {
		return simRun{}, err
	}
	p, err := azdispatch.NewPublisher[payload](sq, nil)
	if err != nil {
		return simRun{}, err
	}
	var accepted, offered atomic.Int64
	begin := time.Now()
	var wg sync.WaitGroup
	for range simPublishers {
		wg.Go(func() {
			for ctx.Err() == nil {
				elapsed := time.Since(begin)
				if elapsed >= tm.warmup+tm.window {
					return
				}
				// Send while behind the offered rate, else wait a tick.
				if offered.Load() >= int64(elapsed.Seconds()*simOffered) {
					time.Sleep(time.Millisecond)
					continue
				}
				offered.Add(1)
				if _, err := p.Send(ctx, payload{Seq: 1, Pad: "x"}); err == nil {
					accepted.Add(1)
				}
			}
		})
	}
	// The buckets start full: measure after they are spent (a tenth more
	// than capacity spends them in 2.5 s), so that the figure is the
	// sustained rate.
	time.Sleep(tm.warmup)
	from, start := accepted.Load(), time.Now()
	wg.Wait()
	done, elapsed := accepted.Load()-from, time.Since(start)
	counts := make([]int64, len(model.queues))
	for i, q := range model.queues {
		counts[i] = q.sent.Load()
	}
	return simRun{msgsPerS: float64(done) / elapsed.Seconds(), maxOverMin: maxOverMin(counts), busy: model.busy.Load()}, nil
}

// simDrain fills every queue with more than a run can drain and measures
// how many messages three listeners process in tm.window.
func simDrain(ctx context.Context, tm simTiming, paced bool) (simRun, error) {
	model := newSimModel(simAccounts, simPerAccount, paced)
	for _, q := range model.queues {
		q.fill(int(simQueueMsgsPerS*(tm.warmup+tm.window).Seconds()*1.5), simPayload)
	}
	sq, err := azdispatch.NewShardedQueue("tasks", model.shards(), nil)
	if err != nil {
		return simRun{}, err
	}
	var listeners []*azdispatch.Listener[payload]
	for i := range 3 {
		sub, err := sq.Subset(i, 3)
		if err != nil {
			return simRun{}, err
		}
		l, err := azdispatch.NewListener(sub, func(context.Context, *azdispatch.Message[payload]) error { return nil },
			&azdispatch.ListenerOptions{PoisonQueue: sq, Concurrency: 256})
		if err != nil {
			return simRun{}, err
		}
		listeners = append(listeners, l)
	}
	succeeded := func() int64 {
		var n int64
		for _, l := range listeners {
			n += l.State().Succeeded
		}
		return n
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Go(func() { _ = l.Run(runCtx) })
	}
	// The buckets start full, and the listeners start with one dequeuer
	// each: measure after the warm-up, so that the figure is the sustained
	// rate.
	time.Sleep(tm.warmup)
	from, start := succeeded(), time.Now()
	time.Sleep(tm.window)
	done := succeeded() - from
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	counts := make([]int64, len(model.queues))
	for i, q := range model.queues {
		counts[i] = q.received.Load()
	}
	return simRun{msgsPerS: float64(done) / elapsed.Seconds(), maxOverMin: maxOverMin(counts), busy: model.busy.Load()}, nil
}

func ptr[T any](v T) *T { return &v }
