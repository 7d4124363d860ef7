package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/endpoint"
)

// The wake scenario: the time from a send to its handler starting, for a
// listener sitting at its maximum back-off (1 s, time-compressed from the
// default 30 s; without a wake-up the wait scales with it). Variants: the
// publisher shares the listener's *Queue in one process (notify), or is
// another process that wakes it over HTTP (notify-http), or that does not
// wake it at all (no-notify). The floor, raw-poll, is a hand-written consumer
// that receives with no sleep at all: about the least a send can take to
// reach a consumer on this emulator. The notify variants are reported as
// ratios to it, so that what the emulator costs is not read as the
// listener's latency.
const (
	wakeBackOff = time.Second
	wakeTimeout = 10 * time.Second
)

// wakeGroups are the variants measured together: a group's rigs run side by
// side, each on its own queue, and are sampled in turns, one message at a
// time. raw-poll takes turns with the notify variants so that the emulator's
// pauses (its clean-up of deleted messages every minute or so, a Node GC, a
// busy machine) fall on all of them alike, instead of on whichever variant
// happened to be running, where they would read as its latency. Groups run
// one after another; no-notify, a back-off wait, needs no floor.
var wakeGroups = []struct {
	variants []string
	samples  int // per variant
}{
	{[]string{"raw-poll", "notify", "notify-http"}, 200},
	{[]string{"no-notify"}, 60},
}

func runWake(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return nil, nil, err
	}
	defer acct.close()
	var recs []record
	lines := []string{fmt.Sprintf("send → handler start, listener idle at its maximum back-off of %v, added latency %v:", wakeBackOff, o.latency)}
	var raw record // the floor; its group runs first
	for _, g := range wakeGroups {
		lat, err := wakeMeasure(ctx, acct.connectionString, o.latency, g.samples, g.variants)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range g.variants {
			slices.Sort(lat[v])
			r := record{Scenario: "wake", Variant: v, P50MS: quantile(lat[v], 0.50), P99MS: quantile(lat[v], 0.99), Messages: len(lat[v]), LatencyMS: ms(o.latency)}
			switch v {
			case "raw-poll":
				raw = r
			case "notify", "notify-http":
				r.P50VsRaw, r.P99VsRaw = r.P50MS/raw.P50MS, r.P99MS/raw.P99MS
			}
			fmt.Fprintf(progress, "wake %-11s %3d samples: p50 %7.1f ms%s, p99 %7.1f ms%s\n",
				v, r.Messages, r.P50MS, timesRaw(r.P50VsRaw), r.P99MS, timesRaw(r.P99VsRaw))
			lines = append(lines, fmt.Sprintf("  %-11s p50 %7.1f ms%-12s   p99 %7.1f ms%-12s   (%d samples)",
				v, r.P50MS, timesRaw(r.P50VsRaw), r.P99MS, timesRaw(r.P99VsRaw), r.Messages))
			recs = append(recs, r)
		}
	}
	return recs, lines, nil
}

// timesRaw formats a ratio to raw-poll's figure; none (0) formats as "".
func timesRaw(x float64) string {
	if x == 0 {
		return ""
	}
	return fmt.Sprintf(" (%.1f× raw)", x)
}

// wakeMeasure sets the variants up and samples them in turns, n samples
// each. It returns each variant's latencies in ms.
func wakeMeasure(ctx context.Context, cs string, latency time.Duration, n int, variants []string) (map[string][]float64, error) {
	var rigs []*wakeRig
	defer func() {
		for _, r := range rigs {
			r.close()
		}
	}()
	for _, v := range variants {
		r, err := newWakeRig(ctx, cs, latency, v)
		if err != nil {
			return nil, fmt.Errorf("wake %s: %w", v, err)
		}
		rigs = append(rigs, r)
	}
	out := make(map[string][]float64, len(rigs))
	for i := range n {
		for _, r := range rigs {
			x, err := r.sample(ctx, i)
			if err != nil {
				return nil, fmt.Errorf("wake %s: %w", r.variant, err)
			}
			out[r.variant] = append(out[r.variant], x)
		}
	}
	return out, nil
}

// wakeRig is one variant running on a queue of its own.
type wakeRig struct {
	variant string
	send    func(ctx context.Context, seq int) error
	started chan time.Time // when the handler (raw-poll: the poller) had the message
	arm     func()         // raw-poll: poll until the next message is in hand
	failed  chan error     // raw-poll: the poller stopped with this error
	close   func()         // stops all the rig started and waits for it
}

// newWakeRig sets variant up on a fresh queue. Call close when done.
func newWakeRig(ctx context.Context, cs string, latency time.Duration, variant string) (r *wakeRig, err error) {
	name := queueName("wake")
	lq, err := openQueue(cs, name, latency)
	if err != nil {
		return nil, err
	}
	if err := lq.Create(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r = &wakeRig{variant: variant, started: make(chan time.Time, 1)}
	r.close = func() {
		cancel()
		wg.Wait()
	}
	defer func() {
		if err != nil {
			r.close()
		}
	}()

	sendTo := lq // notify, raw-poll: the publisher shares the consumer's *Queue
	var onSent func(context.Context, string)
	cfg := &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(wakeBackOff, wakeBackOff)}}
	switch variant {
	case "raw-poll":
		armed := make(chan struct{}, 1)
		r.arm = func() { armed <- struct{}{} } // taken before every next sample
		r.failed = make(chan error, 1)
		wg.Go(func() {
			if err := rawPoll(runCtx, lq, armed, r.started); err != nil {
				r.failed <- err
			}
		})
	case "notify-http", "no-notify":
		// Another process: its own client, so its sends wake nobody here.
		if sendTo, err = openQueue(cs, name, latency); err != nil {
			return nil, err
		}
	}
	if variant == "notify-http" {
		wake := &endpoint.WakeHandler{}
		cfg.Scaling.Wake = wake
		url, err := serve(runCtx, &wg, wake)
		if err != nil {
			return nil, err
		}
		n := endpoint.NewNotifier(url, nil)
		wg.Go(func() { _ = n.Run(runCtx) })
		onSent = func(context.Context, string) { n.Notify() }
	}
	if variant != "raw-poll" {
		l, err := azdispatch.NewListener(lq, func(context.Context, *azdispatch.Message[payload]) error {
			r.started <- time.Now()
			return nil
		}, cfg)
		if err != nil {
			return nil, err
		}
		wg.Go(func() { _ = l.Run(runCtx) })
	}
	p, err := azdispatch.NewPublisher[payload](sendTo, &azdispatch.PublisherOptions{OnSent: onSent})
	if err != nil {
		return nil, err
	}
	r.send = func(ctx context.Context, seq int) error {
		_, err := p.Send(ctx, payload{Seq: seq})
		return err
	}
	return r, nil
}

// sample sends one message and returns, in ms, how long it took to reach the
// handler (raw-poll: to be in the poller's hand).
func (r *wakeRig) sample(ctx context.Context, seq int) (float64, error) {
	if r.arm != nil {
		r.arm() // before the pause: the send lands while the poller is mid-loop
	}
	// Let the listener finish its last receive and fall asleep again.
	time.Sleep(50*time.Millisecond + rand.N(100*time.Millisecond))
	sent := time.Now()
	if err := r.send(ctx, seq); err != nil {
		return 0, err
	}
	select {
	case at := <-r.started:
		return ms(at.Sub(sent)), nil
	case err := <-r.failed: // nil channel, never ready, but for raw-poll
		return 0, fmt.Errorf("raw poller: %w", err)
	case <-time.After(wakeTimeout):
		return 0, fmt.Errorf("message %d not handled within %v", seq, wakeTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// rawPoll is the floor: once armed, it receives in a tight loop, with no
// sleep at all, until it has a message, reports when it had it, deletes it
// and waits to be armed again. Between its own samples it makes no request,
// so that it does not slow the emulator for the variant sampled in turn with
// it. During its own samples it does: the emulator is one Node thread, and
// the send queues behind the poller's receives, so raw-poll is the floor at
// the median, while its p99 carries that self-inflicted load too and can
// come out above the listener's. It returns nil when ctx ends.
func rawPoll(ctx context.Context, q *azdispatch.Queue, armed <-chan struct{}, got chan<- time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-armed:
		}
		var batch []*azdispatch.Delivery
		for len(batch) == 0 {
			var err error
			// As the listener receives: up to a full batch, 30 s hidden.
			if batch, err = q.Receive(ctx, azdispatch.MaxBatch, 30*time.Second); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		select {
		case got <- time.Now():
		case <-ctx.Done():
			return nil
		}
		for _, d := range batch {
			if err := q.Delete(ctx, d); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// serve runs h on a loopback port until ctx ends, as the listener's process
// would, and returns its URL. wg waits for the server to stop.
func serve(ctx context.Context, wg *sync.WaitGroup, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Println("wake server:", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		_ = srv.Close()
	})
	return "http://" + ln.Addr().String() + "/wake", nil
}

// quantile returns the q-quantile of sorted xs (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
