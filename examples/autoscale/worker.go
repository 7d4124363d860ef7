package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/endpoint"
)

// worker is the listening process. It prints one line per event the
// publisher waits on, and returns the process's exit code.
func worker() int {
	if err := listen(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

func listen() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the publisher closes stdin to stop the worker
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	account, err := azdispatch.NewAccountFromConnectionString(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"), nil)
	if err != nil {
		return err
	}
	queue, err := account.Queue(os.Getenv(queueEnv))
	if err != nil {
		return err
	}

	// The wake-up endpoint, on a loopback port of its own.
	wake := &endpoint.WakeHandler{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /wake", wake)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "worker: wake server:", err)
		}
	})
	defer srv.Close()

	var handled, reported atomic.Int64
	var printMu sync.Mutex
	say := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		if m.Body.ID == 1 {
			say("order 1 waited %v from send to handler", time.Since(m.Body.SentAt).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond) // the work
		handled.Add(1)
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			BatchSize:    16, // small dequeuers, so that the burst needs several
			MaxDequeuers: 8,
			// Time-compressed: the defaults are 30 s and 10 s.
			Idle:          azdispatch.ExponentialIdle(0, 2*time.Second),
			ScaleInterval: time.Second,
			Wake:          wake,
		},
		Concurrency: 16,
		OnEvent: func(e azdispatch.Event) {
			switch e.Kind {
			case azdispatch.EventScaleUp:
				say("scale-up to %d dequeuers (depth %d)", e.Dequeuers, e.Depth)
			case azdispatch.EventScaleDown:
				say("scale-down to %d dequeuers", e.Dequeuers)
			case azdispatch.EventIdle:
				// The second empty receive in a row: the queue is quiet,
				// not between two sends of a stream.
				if n := handled.Load(); e.IdleCount == 2 && reported.Swap(n) != n {
					say("handled %d so far; queue empty", n)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	say("ready http://%s/wake", ln.Addr())
	if err := listener.Run(ctx); err != nil {
		return err
	}
	s := listener.State()
	say("stopped: %d handled, at most %d dequeuers, %d wake-ups, %d requests (%d empty receives, %d depth reads)",
		s.Succeeded, s.MaxActiveDequeuers, s.Wakes, s.Transactions.Total(), s.Transactions.EmptyReceive, s.Transactions.Depth)
	return nil
}
