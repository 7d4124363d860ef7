package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// The sharded scenario drains a ShardedQueue over 1, 2 and 3 accounts, each
// a fresh private Azurite process, with one Listener at its defaults. Every
// account holds the same backlog (-messages, over shardsPerAccount queues)
// in every variant: Azurite slows with what one process holds, so spreading
// one backlog over more processes would flatter the ratio. The emulators'
// CPU time shows which side limits. It always uses private emulators.
const shardsPerAccount = 2

// warmUpMessages go through each emulator before a measured drain (fewer
// if the drain itself is smaller).
const warmUpMessages = 500

var shardedVariants = []int{1, 2, 3}

type shardedRun struct {
	processed int
	elapsed   time.Duration
	cpu       []time.Duration // per emulator
}

func runSharded(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	rates := map[int][]float64{}
	cpu := map[int][]float64{}     // total emulator CPU seconds per run
	cpuEach := map[int][]float64{} // summed per emulator over runs
	perCPU := map[int][]float64{}  // msgs per emulator CPU second
	for round := range o.rounds {
		for i := range shardedVariants {
			k := shardedVariants[(i+round)%len(shardedVariants)]
			r, err := shardedOnce(ctx, o, k)
			if err != nil {
				return nil, nil, fmt.Errorf("accounts-%d: %w", k, err)
			}
			total := 0.0
			each := make([]string, len(r.cpu))
			if cpuEach[k] == nil {
				cpuEach[k] = make([]float64, k)
			}
			for j, c := range r.cpu {
				total += c.Seconds()
				cpuEach[k][j] += c.Seconds() / float64(o.rounds)
				each[j] = fmt.Sprintf("%.2f", c.Seconds())
			}
			rate := float64(r.processed) / r.elapsed.Seconds()
			rates[k], cpu[k] = append(rates[k], rate), append(cpu[k], total)
			perCPU[k] = append(perCPU[k], float64(r.processed)/total)
			fmt.Fprintf(progress, "sharded round %d accounts-%d %6d msgs in %6.2fs: %7.0f msgs/s, emulator CPU s %v\n",
				round+1, k, r.processed, r.elapsed.Seconds(), rate, each)
		}
	}
	var recs []record
	for _, k := range shardedVariants {
		recs = append(recs, record{
			Scenario: "sharded", Variant: fmt.Sprintf("accounts-%d", k), MsgsPerS: median(rates[k]), Runs: rates[k],
			Messages: k * o.messages, LatencyMS: float64(o.latency) / float64(time.Millisecond),
			AzuriteCPUS: median(cpu[k]), AzuriteCPUEach: cpuEach[k],
		})
	}
	speedup := median(rates[3]) / median(rates[1])
	efficiency := median(perCPU[3]) / median(perCPU[1])
	recs[0].Ratios = map[string]float64{"accounts3_over_1": speedup, "msgs_per_cpu_s_3_over_1": efficiency}
	lines := []string{
		fmt.Sprintf("%d queues and %d messages per account; one Listener at its defaults", shardsPerAccount, o.messages),
		fmt.Sprintf("3 accounts ÷ 1: %.2f× msgs/s", speedup),
		fmt.Sprintf("msgs per emulator CPU-second, 3 accounts ÷ 1: %.2f (%.0f vs %.0f)", efficiency, median(perCPU[3]), median(perCPU[1])),
		"azurite_cpu_s is the emulators' CPU time during the drain, all processes together (per process in -json).",
	}
	return recs, lines, nil
}

// shardedOnce starts k emulators, fills each account's shards and drains
// them through one ShardedQueue.
func shardedOnce(ctx context.Context, o options, k int) (shardedRun, error) {
	emulators := make([]*account, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { emulators[i], errs[i] = openAccount(ctx, false) })
	}
	wg.Wait()
	defer func() {
		for _, em := range emulators {
			if em != nil {
				em.close()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			return shardedRun{}, err
		}
	}
	for i, em := range emulators {
		wg.Go(func() { errs[i] = warmUp(ctx, em.connectionString, min(warmUpMessages, o.messages)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return shardedRun{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	accts := make([]*azdispatch.Account, k)
	for i, em := range emulators {
		a, err := azdispatch.NewAccountFromConnectionString(em.connectionString, &azdispatch.AccountOptions{
			Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
				Transport: latencyTransport{next: newHTTPClient(), delay: o.latency},
			}},
		})
		if err != nil {
			return shardedRun{}, err
		}
		accts[i] = a
	}
	shards, err := azdispatch.AccountShards(queueName("sharded"), k*shardsPerAccount, accts...)
	if err != nil {
		return shardedRun{}, err
	}
	fillErrs := make([]error, len(shards))
	for i, sh := range shards {
		wg.Go(func() {
			fillErrs[i] = fill(ctx, emulators[i%k].connectionString, sh.Name(), o.messages/shardsPerAccount)
		})
		if i%k == k-1 {
			wg.Wait() // one shard per account at a time
		}
	}
	wg.Wait()
	for _, err := range fillErrs {
		if err != nil {
			return shardedRun{}, fmt.Errorf("fill: %w", err)
		}
	}
	sq, err := azdispatch.NewShardedQueue("sharded", shards, nil)
	if err != nil {
		return shardedRun{}, err
	}
	l, err := azdispatch.NewListener(sq, func(context.Context, *azdispatch.Message[payload]) error { return nil }, nil)
	if err != nil {
		return shardedRun{}, err
	}
	cpu0 := make([]cpuTimes, k)
	for i, em := range emulators {
		if cpu0[i], err = em.cpu(); err != nil {
			return shardedRun{}, err
		}
	}
	want := int64(k * (o.messages / shardsPerAccount) * shardsPerAccount)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- l.Run(runCtx) }()
	end := waitUntil(time.Now().Add(o.limit), func() bool { return l.State().Succeeded >= want })
	processed := l.State().Succeeded
	r := shardedRun{processed: int(processed), elapsed: end.Sub(start)}
	for i, em := range emulators {
		c, err := em.cpu()
		if err != nil {
			stop()
			<-done
			return shardedRun{}, err
		}
		r.cpu = append(r.cpu, c.emulator-cpu0[i].emulator)
	}
	stop()
	return r, <-done
}
