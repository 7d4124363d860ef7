package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The idle-paused scenario: what a pause costs an idle listener. Two
// listeners with the default options, one on an empty queue and one on an
// empty queue paused for the whole window, side by side on one emulator;
// their requests are counted over the window (-duration, 10 minutes by
// default: an idle listener's first minute is its busiest) and given per
// hour.
const idlePausedWindow = 10 * time.Minute

func runIdlePaused(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	window := idlePausedWindow
	if o.duration > 0 {
		window = o.duration
	}
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return nil, nil, err
	}
	defer acct.close()
	fmt.Fprintf(progress, "idle-paused: %v window, two listeners with the defaults, one on a paused queue\n", window)

	var queues [2]*azdispatch.Queue
	for i, name := range []string{"idle-unpaused", "idle-paused"} {
		if queues[i], err = openQueue(acct.connectionString, queueName(name), o.latency); err != nil {
			return nil, nil, err
		}
		if err := queues[i].Create(ctx); err != nil {
			return nil, nil, err
		}
	}
	if _, err := queues[1].Pause(ctx, window+time.Hour, &azdispatch.PauseOptions{By: "idle-paused scenario"}); err != nil {
		return nil, nil, err
	}
	// The listeners' own clients: the pause and the creates are the
	// operator's requests, not theirs.
	var listeners [2]*azdispatch.Listener[payload]
	for i, q := range queues {
		own, err := openQueue(acct.connectionString, q.Name(), o.latency)
		if err != nil {
			return nil, nil, err
		}
		if listeners[i], err = azdispatch.NewListener(own, func(context.Context, *azdispatch.Message[payload]) error { return nil }, nil); err != nil {
			return nil, nil, err
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Go(func() { _ = l.Run(runCtx) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}

	perHour := func(n int64) float64 { return float64(n) / window.Hours() }
	var recs []record
	lines := []string{fmt.Sprintf("requests per hour of a listener with the defaults, measured over %v:", window)}
	for i, variant := range []string{"unpaused", "paused"} {
		tx := listeners[i].State().Transactions
		receives := tx.Receive // empty ones included
		recs = append(recs, record{Scenario: "idle-paused", Variant: variant, Requests: tx.Total(), LatencyMS: ms(o.latency),
			Ratios: map[string]float64{"receives_per_hour": perHour(receives), "pause_reads_per_hour": perHour(tx.Depth), "requests_per_hour": perHour(tx.Total())}})
		lines = append(lines, fmt.Sprintf("  %-9s %6.0f receives, %6.0f pause reads (Get Queue Properties), %6.0f in all",
			variant, perHour(receives), perHour(tx.Depth), perHour(tx.Total())))
	}
	return recs, lines, nil
}
