package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The burst scenario: an idle listener meets 2,000 messages whose handler
// takes 10 ms each. Each dequeuer handles up to 8 at once, so one dequeuer
// cannot keep up and the elastic listener must scale; it is compared with
// listeners fixed at its maximum and at one dequeuer. The depth is read at
// most once a second (ScaleInterval, time-compressed from its 10 s default).
const (
	burstMessages = 2000
	burstHandler  = 10 * time.Millisecond
	burstMax      = 16
	burstPerDeq   = 8
	burstIdle     = 3 * time.Second // how long each listener idles before the burst
	burstSenders  = 16
	burstLatency  = 10 * time.Millisecond // when -latency is not given
	burstRounds   = 3                     // at most, to stay within two minutes
)

var burstVariants = []struct {
	name     string
	min, max int
}{
	{"listener", 1, burstMax},
	{"fixed-max", burstMax, burstMax},
	{"fixed-1", 1, 1},
}

func runBurst(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	latency := o.latency
	if latency == 0 {
		latency = burstLatency // parallelism, not the single-threaded emulator, should decide
	}
	rounds := min(o.rounds, burstRounds)
	times := map[string][]float64{}
	maxActive := map[string]int{}
	for round := range rounds {
		for i := range burstVariants {
			v := burstVariants[(i+round)%len(burstVariants)]
			d, active, err := burstOnce(ctx, o.real, latency, v.min, v.max)
			if err != nil {
				return nil, nil, fmt.Errorf("burst %s: %w", v.name, err)
			}
			times[v.name] = append(times[v.name], d.Seconds())
			maxActive[v.name] = max(maxActive[v.name], active)
			fmt.Fprintf(progress, "burst round %d %-10s drained %d in %6.2fs (most dequeuers at once: %d)\n",
				round+1, v.name, burstMessages, d.Seconds(), active)
		}
	}
	med := map[string]float64{}
	var recs []record
	for _, v := range burstVariants {
		med[v.name] = median(times[v.name])
		recs = append(recs, record{Scenario: "burst", Variant: v.name, DrainS: med[v.name], Messages: burstMessages,
			LatencyMS: ms(latency)})
	}
	ratios := map[string]float64{
		"listener_over_fixed_max": med["listener"] / med["fixed-max"],
		"listener_over_fixed_1":   med["listener"] / med["fixed-1"],
	}
	recs[0].Ratios = ratios
	lines := []string{
		fmt.Sprintf("%d messages, handler %v, %d handlers per dequeuer, added latency %v, median of %d rounds:",
			burstMessages, burstHandler, burstPerDeq, latency, rounds),
	}
	for _, v := range burstVariants {
		lines = append(lines, fmt.Sprintf("  %-10s dequeuers %2d..%-2d drain %6.2fs  (most at once %d)",
			v.name, v.min, v.max, med[v.name], maxActive[v.name]))
	}
	lines = append(lines,
		fmt.Sprintf("Listener ÷ fixed-max drain time: %.2f", ratios["listener_over_fixed_max"]),
		fmt.Sprintf("Listener ÷ fixed-1 drain time:   %.2f", ratios["listener_over_fixed_1"]))
	return recs, lines, nil
}

// burstOnce idles a listener with min..max dequeuers on a fresh emulator,
// sends the burst through the listener's own queue (so the sends wake it, as
// a publisher in the same process would) and times the drain from the first
// send. It returns the most dequeuers that ran at once.
func burstOnce(ctx context.Context, real bool, latency time.Duration, minDeq, maxDeq int) (time.Duration, int, error) {
	acct, err := openAccount(ctx, real)
	if err != nil {
		return 0, 0, err
	}
	defer acct.close()
	q, err := openQueue(acct.connectionString, queueName("burst"), latency)
	if err != nil {
		return 0, 0, err
	}
	if err := q.Create(ctx); err != nil {
		return 0, 0, err
	}
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[payload]) error {
		time.Sleep(burstHandler)
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			BatchSize:     burstPerDeq,
			MinDequeuers:  minDeq,
			MaxDequeuers:  maxDeq,
			ScaleInterval: time.Second,
		},
		Concurrency: burstPerDeq,
	})
	if err != nil {
		return 0, 0, err
	}
	stop := runListener(ctx, l)
	time.Sleep(burstIdle)

	p, err := azdispatch.NewPublisher[payload](q, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, burstSenders)
	for s := range burstSenders {
		wg.Go(func() {
			for i := s; i < burstMessages; i += burstSenders {
				if _, err := p.Send(ctx, payload{Seq: i, Pad: padding}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		_ = stop()
		return 0, 0, fmt.Errorf("send: %w", err)
	}
	end := waitUntil(start.Add(2*time.Minute), func() bool { return l.State().Succeeded >= burstMessages })
	s := l.State()
	if err := stop(); err != nil {
		return 0, 0, err
	}
	if s.Succeeded < burstMessages {
		return 0, 0, fmt.Errorf("only %d of %d handled within 2 minutes", s.Succeeded, burstMessages)
	}
	return end.Sub(start), s.MaxActiveDequeuers, nil
}
