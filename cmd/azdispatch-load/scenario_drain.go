package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// runDrain compares how fast each variant empties a queue of o.messages, each
// run on a fresh emulator filled to the same depth, rounds interleaved so that
// drift on a shared machine hits every variant alike.
func runDrain(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	rates := make(map[string][]float64)
	requests := make(map[string]int64)
	processed := make(map[string]int)
	for round := range o.rounds {
		for i := range drainVariants {
			v := drainVariants[(i+round)%len(drainVariants)]
			run, err := drainOnce(ctx, o, v.drain)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", v.name, err)
			}
			rate := float64(run.processed) / run.elapsed.Seconds()
			rates[v.name] = append(rates[v.name], rate)
			requests[v.name] += run.requests
			processed[v.name] += run.processed
			fmt.Fprintf(progress, "drain round %d %-15s %6d msgs in %6.2fs: %7.0f msgs/s, CPU s: emulator %.2f, client %.2f\n",
				round+1, v.name, run.processed, run.elapsed.Seconds(), rate, run.emulatorCPU.Seconds(), run.clientCPU.Seconds())
		}
	}

	var recs []record
	med := map[string]float64{}
	for _, v := range drainVariants {
		med[v.name] = median(rates[v.name])
		recs = append(recs, record{
			Scenario: "drain", Variant: v.name, MsgsPerS: med[v.name],
			TxPerMsg: float64(requests[v.name]) / float64(max(processed[v.name], 1)),
			Runs:     rates[v.name], Messages: o.messages, LatencyMS: float64(o.latency) / float64(time.Millisecond),
		})
	}
	raw := max(med["raw-sequential"], med["raw-parallel"])
	ratios := map[string]float64{
		"listener_over_raw":           med["listener"] / raw,
		"listener_over_one_at_a_time": med["listener"] / med["one-at-a-time"],
	}
	recs[0].Ratios = ratios
	lines := []string{
		fmt.Sprintf("Listener ÷ raw loop (the faster of sequential and parallel deletes): %.2f", ratios["listener_over_raw"]),
		fmt.Sprintf("Listener ÷ one-at-a-time:                                          %.2f", ratios["listener_over_one_at_a_time"]),
		"tx/msg counts receives (empty ones too), deletes and updates per processed message; sends are not counted.",
	}
	return recs, lines, nil
}

// drainOnce fills a fresh queue on a fresh account and drains it with d.
func drainOnce(ctx context.Context, o options, d drainer) (drainRun, error) {
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return drainRun{}, err
	}
	defer acct.close()
	queue := queueName("drain")
	if err := fill(ctx, acct.connectionString, queue, o.messages); err != nil {
		return drainRun{}, fmt.Errorf("fill: %w", err)
	}
	cpu0, err := acct.cpu()
	if err != nil {
		return drainRun{}, err
	}
	run, err := d(ctx, acct.connectionString, queue, o.messages, o.latency, time.Now().Add(o.limit))
	cpu1, _ := acct.cpu()
	run.emulatorCPU = cpu1.emulator - cpu0.emulator
	run.clientCPU = cpu1.client - cpu0.client
	return run, err
}
