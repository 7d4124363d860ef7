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
)

// The wake scenario: the time from a send to its handler starting, for a
// listener sitting at its maximum back-off (1 s, time-compressed from the
// default 30 s; without a wake-up the wait scales with it). Variants: the
// publisher shares the listener's *Queue in one process (notify), or is
// another process that wakes it over HTTP (notify-http), or that does not
// wake it at all (no-notify).
const (
	wakeBackOff = time.Second
	wakeTimeout = 10 * time.Second
)

var wakeVariants = []struct {
	name    string
	samples int
}{
	{"notify", 200},
	{"notify-http", 200},
	{"no-notify", 60},
}

func runWake(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return nil, nil, err
	}
	defer acct.close()
	var recs []record
	lines := []string{fmt.Sprintf("send → handler start, listener idle at its maximum back-off of %v, added latency %v:", wakeBackOff, o.latency)}
	for _, v := range wakeVariants {
		lat, err := wakeOnce(ctx, acct.connectionString, o.latency, v.name, v.samples)
		if err != nil {
			return nil, nil, fmt.Errorf("wake %s: %w", v.name, err)
		}
		slices.Sort(lat)
		p50, p99 := quantile(lat, 0.50), quantile(lat, 0.99)
		fmt.Fprintf(progress, "wake %-11s %3d samples: p50 %7.1f ms, p99 %7.1f ms\n", v.name, len(lat), p50, p99)
		recs = append(recs, record{Scenario: "wake", Variant: v.name, P50MS: p50, P99MS: p99, Messages: len(lat), LatencyMS: ms(o.latency)})
		lines = append(lines, fmt.Sprintf("  %-11s p50 %7.1f ms   p99 %7.1f ms   (%d samples)", v.name, p50, p99, len(lat)))
	}
	return recs, lines, nil
}

// wakeOnce measures one variant on its own queue: one message at a time, each
// sent once the listener has gone back to sleep.
func wakeOnce(ctx context.Context, cs string, latency time.Duration, variant string, samples int) ([]float64, error) {
	name := queueName("wake")
	lq, err := openQueue(cs, name, latency)
	if err != nil {
		return nil, err
	}
	if err := lq.Create(ctx); err != nil {
		return nil, err
	}
	started := make(chan time.Time, 1)
	cfg := &azdispatch.ListenerOptions{Idle: azdispatch.ExponentialIdle(wakeBackOff, wakeBackOff)}
	sendTo := lq // notify: the publisher shares the listener's *Queue
	var onSent func(context.Context, string)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel below, which ends what wg waits for
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if variant != "notify" {
		// Another process: its own client, so its sends wake nobody here.
		if sendTo, err = openQueue(cs, name, latency); err != nil {
			return nil, err
		}
	}
	if variant == "notify-http" {
		wake := &azdispatch.WakeHandler{}
		cfg.Wake = wake
		url, err := serve(runCtx, &wg, wake)
		if err != nil {
			return nil, err
		}
		n := azdispatch.NewHTTPNotifier(url, nil)
		wg.Go(func() { _ = n.Run(runCtx) })
		onSent = func(context.Context, string) { n.Notify() }
	}
	l, err := azdispatch.NewListener(lq, func(context.Context, *azdispatch.Message[payload]) error {
		started <- time.Now()
		return nil
	}, cfg)
	if err != nil {
		return nil, err
	}
	stop := runListener(runCtx, l)
	defer func() { _ = stop() }()
	p, err := azdispatch.NewPublisher[payload](sendTo, &azdispatch.PublisherOptions{OnSent: onSent})
	if err != nil {
		return nil, err
	}

	var out []float64
	for i := range samples {
		// Let the listener finish its last receive and fall asleep again.
		time.Sleep(50*time.Millisecond + rand.N(100*time.Millisecond))
		sent := time.Now()
		if _, err := p.Send(ctx, payload{Seq: i}); err != nil {
			return nil, err
		}
		select {
		case at := <-started:
			out = append(out, ms(at.Sub(sent)))
		case <-time.After(wakeTimeout):
			return nil, fmt.Errorf("message %d not handled within %v", i, wakeTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
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
