package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

var (
	batchItems  = flag.Int("batch-items", 100_000, "batch scenario: items sent as batches of -batch-size")
	batchSize   = flag.Int("batch-size", 1000, "batch scenario: items per batch")
	singleItems = flag.Int("single-items", 5000, "batch scenario: items sent as single messages (Azurite manages about 500 a second, so fewer)")
)

// smallPad makes each item about 120 bytes of JSON.
var smallPad = strings.Repeat("x", 100)

// batchRecord is one line of -json output for the batch scenario.
type batchRecord struct {
	Scenario       string             `json:"scenario"`
	Variant        string             `json:"variant"`
	Items          int                `json:"items"`
	ItemsPerS      float64            `json:"items_per_s"`
	TxPerItem      float64            `json:"tx_per_item"`
	QueueTxPerItem float64            `json:"queue_tx_per_item"`
	BlobTxPerItem  float64            `json:"blob_tx_per_item"`
	Runs           []float64          `json:"runs_items_per_s"`
	LatencyMS      float64            `json:"latency_ms"`
	Ratios         map[string]float64 `json:"ratios,omitempty"`
}

// batchRun is what one variant did in one run.
type batchRun struct {
	items       int // processed
	elapsed     time.Duration
	queue, blob int64 // requests by both sides
}

// batchVariants feed items through a fresh emulator, sending and processing
// at once (a queue filled up front would slow the emulator for the single
// variant: each of its requests costs more with every message it holds), and
// count every request of both sides.
func batchVariants() []struct {
	name string
	run  func(ctx context.Context, cs string, o options, deadline time.Time) (batchRun, error)
} {
	return []struct {
		name string
		run  func(ctx context.Context, cs string, o options, deadline time.Time) (batchRun, error)
	}{
		{"single", func(ctx context.Context, cs string, o options, dl time.Time) (batchRun, error) {
			return feedAndDrain(ctx, cs, o, *singleItems, 1, dl)
		}},
		{fmt.Sprintf("batch-%d", *batchSize), func(ctx context.Context, cs string, o options, dl time.Time) (batchRun, error) {
			return feedAndDrain(ctx, cs, o, *batchItems, *batchSize, dl)
		}},
	}
}

// runBatch compares items sent one per message with items sent in batches,
// rounds interleaved, each run on a fresh emulator.
func runBatch(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	variants := batchVariants()
	rates := map[string][]float64{}
	totals := map[string]*batchRun{}
	for round := range o.rounds {
		for i := range variants {
			v := variants[(i+round)%len(variants)]
			run, err := batchOnce(ctx, o, v.run)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", v.name, err)
			}
			rate := float64(run.items) / run.elapsed.Seconds()
			rates[v.name] = append(rates[v.name], rate)
			t := totals[v.name]
			if t == nil {
				t = &batchRun{}
				totals[v.name] = t
			}
			t.items += run.items
			t.queue += run.queue
			t.blob += run.blob
			fmt.Fprintf(progress, "batch round %d %-11s %7d items in %6.2fs: %8.0f items/s, %.4f tx/item (queue %d, blob %d)\n",
				round+1, v.name, run.items, run.elapsed.Seconds(), rate,
				float64(run.queue+run.blob)/float64(max(run.items, 1)), run.queue, run.blob)
		}
	}
	var recs []batchRecord
	for _, v := range variants {
		t := totals[v.name]
		n := float64(max(t.items, 1))
		recs = append(recs, batchRecord{
			Scenario: "batch", Variant: v.name, Items: t.items / max(o.rounds, 1), ItemsPerS: median(rates[v.name]),
			TxPerItem: float64(t.queue+t.blob) / n, QueueTxPerItem: float64(t.queue) / n, BlobTxPerItem: float64(t.blob) / n,
			Runs: rates[v.name], LatencyMS: float64(o.latency) / float64(time.Millisecond),
		})
	}
	speedup := recs[1].ItemsPerS / recs[0].ItemsPerS
	recs[1].Ratios = map[string]float64{"items_per_s_over_single": speedup, "tx_per_item_over_single": recs[1].TxPerItem / recs[0].TxPerItem}
	if o.json {
		// The batch scenario's fields are per item; it prints its own records.
		enc := json.NewEncoder(os.Stdout)
		for _, r := range recs {
			_ = enc.Encode(r)
		}
		return nil, nil, nil
	}
	var table []record
	for _, r := range recs {
		table = append(table, record{Scenario: r.Scenario, Variant: r.Variant, MsgsPerS: r.ItemsPerS, TxPerMsg: r.TxPerItem, Runs: r.Runs, Messages: r.Items})
	}
	lines := []string{
		"(for this scenario the columns are items/s and requests per item, both sides, queue and blob)",
		fmt.Sprintf("single: %d items one per message; %s: %d items; items of about 120 bytes of JSON", *singleItems, recs[1].Variant, *batchItems),
		fmt.Sprintf("%s ÷ single, items/s: %.1f", recs[1].Variant, speedup),
		fmt.Sprintf("requests per item: single %.3f (queue %.3f, blob %.3f); %s %.4f (queue %.4f, blob %.4f)",
			recs[0].TxPerItem, recs[0].QueueTxPerItem, recs[0].BlobTxPerItem, recs[1].Variant, recs[1].TxPerItem, recs[1].QueueTxPerItem, recs[1].BlobTxPerItem),
	}
	return table, lines, nil
}

// batchOnce runs one variant on a fresh account.
func batchOnce(ctx context.Context, o options, run func(context.Context, string, options, time.Time) (batchRun, error)) (batchRun, error) {
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return batchRun{}, err
	}
	defer acct.close()
	return run(ctx, acct.connectionString, o, time.Now().Add(o.limit))
}

// feedAndDrain sends n items, per items a message (1 for single messages),
// from 4 senders, while a default Listener processes them; the senders keep
// at most 1,000 messages ahead of the listener, so that the emulator never
// holds many. It ends when every item is processed or at the deadline.
func feedAndDrain(ctx context.Context, cs string, o options, n, per int, deadline time.Time) (batchRun, error) {
	open := func() (*azdispatch.Queue, *azdispatch.Account, error) {
		a, err := azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
			Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
				Transport: latencyTransport{next: newHTTPClient(), delay: o.latency},
			}},
		})
		if err != nil {
			return nil, nil, err
		}
		q, err := a.Queue("batch-items")
		return q, a, err
	}
	pq, pubAcct, err := open()
	if err != nil {
		return batchRun{}, err
	}
	lq, lisAcct, err := open()
	if err != nil {
		return batchRun{}, err
	}
	pub, err := azdispatch.NewPublisher[payload](pq, nil)
	if err != nil {
		return batchRun{}, err
	}
	var processed atomic.Int64
	l, err := azdispatch.NewListener(lq, func(_ context.Context, m *azdispatch.Message[payload]) error {
		processed.Add(1)
		return nil
	}, nil)
	if err != nil {
		return batchRun{}, err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	listened := make(chan error, 1)
	go func() { listened <- l.Run(runCtx) }()

	messages := (n + per - 1) / per
	var next atomic.Int64
	var sent atomic.Int64
	var senders sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		senders.Go(func() {
			for runCtx.Err() == nil {
				m := int(next.Add(1)) - 1
				if m >= messages {
					return
				}
				for sent.Load()-processed.Load()/int64(per) > 1000 && runCtx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				items := make([]payload, 0, per)
				for i := m * per; i < min((m+1)*per, n); i++ {
					items = append(items, payload{Seq: i, Pad: smallPad})
				}
				var err error
				if per == 1 {
					_, err = pub.Send(runCtx, items[0])
				} else {
					_, err = pub.SendBatch(runCtx, items, nil)
				}
				if err != nil && runCtx.Err() == nil {
					errs <- err
					stop()
					return
				}
				sent.Add(1)
			}
		})
	}
	end := waitUntil(deadline, func() bool { return processed.Load() >= int64(n) || runCtx.Err() != nil })
	got := processed.Load()
	stop()
	senders.Wait()
	if err := <-listened; err != nil {
		return batchRun{}, err
	}
	select {
	case err := <-errs:
		return batchRun{}, err
	default:
	}
	pt, lt := pubAcct.Transactions(), lisAcct.Transactions()
	return batchRun{
		items: int(got), elapsed: end.Sub(start),
		queue: pt.Total() - pt.Blob() + lt.Total() - lt.Blob(),
		blob:  pt.Blob() + lt.Blob(),
	}, nil
}
