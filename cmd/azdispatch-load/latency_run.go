package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// arrival is when a message is sent, from the start of a variant's run,
// and whether it falls in the measured window.
type arrival struct {
	at       time.Duration
	measured bool
}

// latencyArrivals draws the arrivals both variants get: Poisson at c.Rate
// over the warm-up and the window, and c.Burst at once every c.BurstEvery
// in the window, the first half an interval in (so that the last is not at
// its very end, where the drain would hide it). Sorted by time.
func latencyArrivals(c latencyConfig, seed int64) []arrival {
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	end := c.Warmup + c.Duration
	var out []arrival
	for t := time.Duration(0); ; {
		t += time.Duration(rng.ExpFloat64() / c.Rate * float64(time.Second))
		if t >= end {
			break
		}
		out = append(out, arrival{at: t, measured: t >= c.Warmup})
	}
	for b := c.Warmup + c.BurstEvery/2; b < end; b += c.BurstEvery {
		for range c.Burst {
			out = append(out, arrival{at: b, measured: true})
		}
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	return out
}

func measuredCount(as []arrival) int {
	n := 0
	for _, a := range as {
		if a.measured {
			n++
		}
	}
	return n
}

// latencyRun is what one variant did.
type latencyRun struct {
	waits         []time.Duration // measured messages' time in queue
	target        time.Duration
	handled       int64 // every message, the warm-up's included
	tx            azdispatch.Transactions
	state         azdispatch.State
	meanDequeuers float64
	drain         time.Duration
}

// waits records each message's time in queue on its first delivery, by
// sequence number, so that a redelivery is not counted twice.
type waits struct {
	mu   sync.Mutex
	seen []bool
	of   []time.Duration
}

func (w *waits) add(seq int, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq >= 0 && seq < len(w.seen) && !w.seen[seq] {
		w.seen[seq], w.of[seq] = true, d
	}
}

// latencyOnce runs one variant on a fresh queue: a listener shaped by c,
// scaling to c.Target if toTarget, else by depth, meets the arrivals; it
// returns once every message has been handled.
func latencyOnce(ctx context.Context, c latencyConfig, perRequest time.Duration, arrivals []arrival, toTarget bool, progress io.Writer) (latencyRun, error) {
	q := memqueue.New(queueName("latency"), &memqueue.Options{
		// Every request takes a round trip, as against a real account.
		Intercept: func(ctx context.Context, _ string, _ azdispatch.Op) error {
			return sleepCtx(ctx, perRequest)
		},
	})
	var src azdispatch.Source = q
	if !c.Wake {
		src = unwoken{q}
	}
	w := &waits{seen: make([]bool, len(arrivals)), of: make([]time.Duration, len(arrivals))}
	opts := &azdispatch.ListenerOptions{
		Concurrency: c.Concurrency,
		Scaling: azdispatch.ScalingOptions{
			MaxDequeuers: c.MaxDequeuers,
		},
		PoisonQueue: q.PoisonQueue(),
	}
	if toTarget {
		opts.Scaling.TargetWait = c.Target
	}
	l, err := azdispatch.NewListener(src, func(ctx context.Context, m *azdispatch.Message[payload]) error {
		if m.DequeueCount == 1 {
			w.add(m.Body.Seq, m.TimeInQueue)
		}
		return sleepCtx(ctx, c.Handler)
	}, opts)
	if err != nil {
		return latencyRun{}, err
	}
	p, err := azdispatch.NewPublisher[payload](q, nil)
	if err != nil {
		return latencyRun{}, err
	}
	stop := runListener(ctx, l)

	start := time.Now()
	windowFrom, windowTo := start.Add(c.Warmup), start.Add(c.Warmup+c.Duration)
	sampled := sampleDequeuers(ctx, l, windowFrom, windowTo)
	sendErr := sendArrivals(ctx, p, start, arrivals)

	deadline := windowTo.Add(c.Drain)
	all := int64(len(arrivals))
	drained := waitUntil(deadline, func() bool { return ctx.Err() != nil || l.State().Succeeded >= all })
	mean := <-sampled
	s := l.State()
	tx := q.Transactions()
	if err := stop(); err != nil {
		return latencyRun{}, err
	}
	switch {
	case sendErr != nil:
		return latencyRun{}, fmt.Errorf("send: %w", sendErr)
	case ctx.Err() != nil:
		return latencyRun{}, ctx.Err()
	case s.Succeeded < all:
		return latencyRun{}, fmt.Errorf("only %d of %d messages handled %v after the window", s.Succeeded, all, c.Drain)
	}
	r := latencyRun{target: c.Target, handled: s.Succeeded, tx: tx, state: s, meanDequeuers: mean, drain: max(drained.Sub(windowTo), 0)}
	for i, a := range arrivals {
		if a.measured && w.seen[i] {
			r.waits = append(r.waits, w.of[i])
		}
	}
	if len(r.waits) != measuredCount(arrivals) {
		fmt.Fprintf(progress, "latency: %d measured messages had no first delivery counted\n", measuredCount(arrivals)-len(r.waits))
	}
	return r, nil
}

// sendArrivals sends each message at its time from start, each on its own
// goroutine, so that a burst lands at once and a slow send (every request
// takes its round trip) does not delay the next. It returns the first
// error once every send has ended.
func sendArrivals(ctx context.Context, p *azdispatch.Publisher[payload], start time.Time, arrivals []arrival) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(arrivals))
	for i, a := range arrivals {
		if sleepCtx(ctx, time.Until(start.Add(a.at))) != nil {
			break
		}
		wg.Go(func() {
			if _, err := p.Send(ctx, payload{Seq: i}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// sampleDequeuers averages the listener's running dequeuers over [from,
// to), sampled every 100 ms, and sends the mean when the window ends (or
// ctx does, so that an interrupted run does not wait for it).
func sampleDequeuers[T any](ctx context.Context, l *azdispatch.Listener[T], from, to time.Time) <-chan float64 {
	out := make(chan float64, 1)
	go func() {
		var sum, n float64
		wait := time.Until(from)
		for sleepCtx(ctx, wait) == nil && time.Now().Before(to) {
			sum += float64(l.State().ActiveDequeuers)
			n++
			wait = 100 * time.Millisecond
		}
		out <- sum / max(n, 1)
	}()
	return out
}

// unwoken is a memqueue the listener cannot subscribe to: the sends are
// made elsewhere, as by publishers in other processes, and the listener
// finds them by polling.
type unwoken struct{ q *memqueue.Queue }

func (u unwoken) Name() string { return u.q.Name() }
func (u unwoken) Receive(ctx context.Context, max int, visibility time.Duration) ([]*azdispatch.Delivery, error) {
	return u.q.Receive(ctx, max, visibility)
}
func (u unwoken) Delete(ctx context.Context, d *azdispatch.Delivery) error { return u.q.Delete(ctx, d) }
func (u unwoken) SetVisibility(ctx context.Context, d *azdispatch.Delivery, after time.Duration) error {
	return u.q.SetVisibility(ctx, d, after)
}
func (u unwoken) Depth(ctx context.Context) (int, error) { return u.q.Depth(ctx) }

// record summarizes the run for -json and the table.
func (r latencyRun) record(c latencyConfig, variant string, seed int64, perRequest time.Duration) latencyRecord {
	// In seconds, sorted, for quantile (wake.go's).
	ws := make([]float64, len(r.waits))
	over := 0
	for i, d := range r.waits {
		ws[i] = d.Seconds()
		if d > r.target {
			over++
		}
	}
	slices.Sort(ws)
	rec := latencyRecord{
		Scenario: "latency", Variant: variant, Messages: len(ws),
		P50S: quantile(ws, 0.50), P99S: quantile(ws, 0.99),
		EmptyReceives: r.tx.EmptyReceive, MaxDequeuersSeen: r.state.MaxActiveDequeuers,
		MeanDequeuers: r.meanDequeuers, ScaleUps: r.state.ScaleUps, DrainS: r.drain.Seconds(),
		Seed: seed, RatePerS: c.Rate, Burst: c.Burst, BurstEveryS: c.BurstEvery.Seconds(), HandlerS: c.Handler.Seconds(),
		Concurrency: c.Concurrency, MaxDequeuers: c.MaxDequeuers, TargetS: c.Target.Seconds(),
		WarmupS: c.Warmup.Seconds(), DurationS: c.Duration.Seconds(), LatencyMS: ms(perRequest), Wake: c.Wake,
	}
	if len(ws) > 0 {
		rec.MaxS = ws[len(ws)-1]
		rec.OverTarget = float64(over) / float64(len(ws))
	}
	if r.handled > 0 {
		rec.TxPerMsg = float64(r.tx.Total()) / float64(r.handled)
		rec.ListenerTxPerMsg = float64(r.tx.Total()-r.tx.Send) / float64(r.handled)
	}
	return rec
}
