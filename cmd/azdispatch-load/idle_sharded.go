package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The idle-sharded scenario counts the requests an idle Listener makes on a
// ShardedQueue of 10 shards and on a single queue, both at once on one fresh
// emulator, over shardIdleWindow (or options.idle). Time is compressed: the listeners' idle curve
// tops out at shardIdleMax instead of the default 30 s, so the window holds as
// many polls at the cap as 30 times its length would at the defaults.
const (
	idleShards      = 10
	shardIdleMax    = time.Second
	shardIdleWindow = 60 * time.Second
	idleRamp        = 10 * time.Second // the curve's climb, left out of the per-hour figure
)

// idleTiming is how long the idle-sharded scenario watches, and how much of
// the start (the idle curve's climb) it leaves out of the per-hour figure.
type idleTiming struct{ window, ramp time.Duration }

func runIdleSharded(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	tm := o.idle
	if tm == (idleTiming{}) {
		tm = idleTiming{window: shardIdleWindow, ramp: idleRamp}
	}
	if tm.ramp <= 0 || tm.ramp >= tm.window {
		return nil, nil, fmt.Errorf("idle-sharded: ramp %v must be within the window %v", tm.ramp, tm.window)
	}
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return nil, nil, err
	}
	defer acct.close()
	a, err := azdispatch.NewAccountFromConnectionString(acct.connectionString, nil)
	if err != nil {
		return nil, nil, err
	}
	shards, err := azdispatch.AccountShards(queueName("idle"), idleShards, a)
	if err != nil {
		return nil, nil, err
	}
	sq, err := azdispatch.NewShardedQueue("idle", shards, nil)
	if err != nil {
		return nil, nil, err
	}
	single, err := a.Queue(queueName("idle"))
	if err != nil {
		return nil, nil, err
	}
	// Created beforehand: creation is not idling.
	if err := sq.Create(ctx); err != nil {
		return nil, nil, err
	}
	if err := single.Create(ctx); err != nil {
		return nil, nil, err
	}
	variants := []struct {
		name string
		src  azdispatch.Source
	}{{"sharded-10", sq}, {"single", single}}
	type count struct{ total, afterRamp int64 }
	counts := make([]count, len(variants))
	var wg sync.WaitGroup
	fmt.Fprintf(progress, "idle-sharded: %v of idle listeners, idle curve capped at %v\n", tm.window, shardIdleMax)
	for i, v := range variants {
		l, err := azdispatch.NewListener(v.src, func(context.Context, *azdispatch.Message[payload]) error { return nil },
			&azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, shardIdleMax)}})
		if err != nil {
			return nil, nil, err
		}
		runCtx, stop := context.WithTimeout(ctx, tm.window)
		wg.Go(func() {
			defer stop()
			var atRamp int64
			fired := make(chan struct{})
			ramp := time.AfterFunc(tm.ramp, func() {
				atRamp = l.State().Transactions.Total()
				close(fired)
			})
			_ = l.Run(runCtx)
			if !ramp.Stop() {
				<-fired // it ran: its count is written
			}
			s := l.State().Transactions.Total()
			counts[i].total, counts[i].afterRamp = s, s-atRamp
		})
	}
	wg.Wait()
	var recs []record
	perHour := make([]float64, len(variants))
	compression := float64(30*time.Second) / float64(shardIdleMax)
	for i, v := range variants {
		perHour[i] = float64(counts[i].afterRamp) / (tm.window - tm.ramp).Hours() / compression
		recs = append(recs, record{Scenario: "idle-sharded", Variant: v.name, Requests: counts[i].total})
		fmt.Fprintf(progress, "idle-sharded %-10s %5d requests in %v (%d after the first %v)\n",
			v.name, counts[i].total, tm.window, counts[i].afterRamp, tm.ramp)
	}
	ratio := float64(counts[0].total) / float64(counts[1].total)
	recs[0].Ratios = map[string]float64{"sharded_over_single": ratio}
	lines := []string{
		fmt.Sprintf("requests in %v, idle curve capped at %v: sharded-10 %d, single %d; sharded ÷ single %.2f",
			tm.window, shardIdleMax, counts[0].total, counts[1].total, ratio),
		fmt.Sprintf("per hour at the default 30 s cap (steady state, scaled by %.0f): sharded-10 %.0f, single %.0f",
			compression, perHour[0], perHour[1]),
		fmt.Sprintf("a message alone on one of %d idle shards is found within %d polls: %v at the default cap", idleShards, idleShards, idleShards*30*time.Second),
	}
	return recs, lines, nil
}
