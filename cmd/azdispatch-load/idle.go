package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The idle scenario: what an empty queue costs. A Listener allowed 16
// dequeuers, with the idle curve from idleMin to idleMax, against 16 pollers
// at the curve's minimum interval, over the same window, side by side on
// one emulator.
const (
	idleWindow  = 60 * time.Second
	idleMin     = 100 * time.Millisecond
	idleMax     = 30 * time.Second
	idlePollers = 16
)

func runIdle(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return nil, nil, err
	}
	defer acct.close()
	fmt.Fprintf(progress, "idle: %v window, listener (MaxDequeuers %d, idle curve %v..%v) beside %d pollers every %v\n",
		idleWindow, idlePollers, idleMin, idleMax, idlePollers, idleMin)

	lq, err := openQueue(acct.connectionString, queueName("idle-listener"), o.latency)
	if err != nil {
		return nil, nil, err
	}
	fq, err := openQueue(acct.connectionString, queueName("idle-fixed"), o.latency)
	if err != nil {
		return nil, nil, err
	}
	for _, q := range []*azdispatch.Queue{lq, fq} {
		if err := q.Create(ctx); err != nil {
			return nil, nil, err
		}
	}
	l, err := azdispatch.NewListener(lq, func(context.Context, *azdispatch.Message[payload]) error { return nil },
		&azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: idlePollers, Idle: azdispatch.ExponentialIdle(idleMin, idleMax)}})
	if err != nil {
		return nil, nil, err
	}

	before := lq.Transactions().Total()
	fixedBefore := fq.Transactions().Total()
	runCtx, cancel := context.WithTimeout(ctx, idleWindow)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { _ = l.Run(runCtx) })
	for range idlePollers {
		wg.Go(func() { pollEvery(runCtx, fq, idleMin) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	listener := lq.Transactions().Total() - before
	fixed := fq.Transactions().Total() - fixedBefore

	ratio := float64(listener) / float64(max(fixed, 1))
	perMonth := func(n int64) float64 { return float64(n) / idleWindow.Hours() * 24 * 30 }
	recs := []record{
		{Scenario: "idle", Variant: "listener", Requests: listener, LatencyMS: ms(o.latency), Ratios: map[string]float64{"listener_over_fixed": ratio}},
		{Scenario: "idle", Variant: "fixed", Requests: fixed, LatencyMS: ms(o.latency)},
	}
	lines := []string{
		fmt.Sprintf("requests in %v on an empty queue:", idleWindow),
		fmt.Sprintf("  listener (MaxDequeuers %d, curve %v..%v): %6d", idlePollers, idleMin, idleMax, listener),
		fmt.Sprintf("  %d fixed pollers every %v:               %6d", idlePollers, idleMin, fixed),
		fmt.Sprintf("Listener ÷ fixed: %.4f (%.2f%%)", ratio, 100*ratio),
		fmt.Sprintf("At this rate for 30 days the fixed pollers make %.3g requests; the listener's first minute is its costliest", perMonth(fixed)),
		"(the curve climbs to its cap), and at the cap it makes one request every 24–30 s: about 96,000 a month.",
	}
	return recs, lines, nil
}

// pollEvery receives from q every interval until ctx ends: the fixed poller
// the listener is compared with.
func pollEvery(ctx context.Context, q *azdispatch.Queue, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = q.Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ms converts a duration to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
