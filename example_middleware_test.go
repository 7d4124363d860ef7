package azdispatch_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A middleware sees every handler call with its message's metadata, and
// the outcome; a send middleware adds metadata that travels with the
// message. One middleware serves listeners of every type.
func ExampleMiddlewareFunc() {
	queue := memqueue.New("orders", nil)
	tenant := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		s.Set("tenant", "contoso")
		return s.Next(ctx)
	})
	publisher, err := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{tenant},
	})
	if err != nil {
		panic(err)
	}
	if _, err := publisher.Send(context.Background(), Order{ID: 42}); err != nil {
		panic(err)
	}

	handled := make(chan struct{})
	logCalls := azdispatch.MiddlewareFunc(func(ctx context.Context, c *azdispatch.Call) error {
		err := c.Next(ctx)
		fmt.Printf("queue %s, try %d, tenant %s, %d bytes: err=%v\n", c.Queue, c.DequeueCount, c.Metadata["tenant"], c.Size, err)
		close(handled)
		return err
	})
	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		fmt.Println("handling order", m.Body.ID)
		return nil
	}, &azdispatch.ListenerOptions{Middleware: []azdispatch.Middleware{logCalls}})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- listener.Run(ctx) }()
	<-handled
	stop()
	<-done
	// Output:
	// handling order 42
	// queue orders, try 1, tenant contoso, 9 bytes: err=<nil>
}

// Two listeners share one quota for a downstream API: together their
// handlers start no faster than the limiter allows, and each receives no
// more messages than it has turns for soon.
func ExampleListenerOptions_rateLimit() {
	quota := rate.NewLimiter(rate.Every(10*time.Millisecond), 1) // 100 calls a second, shared
	var mu sync.Mutex
	calls := 0
	tenth := make(chan struct{})
	handler := func(context.Context, *azdispatch.Message[Order]) error {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 10 {
			close(tenth)
		}
		return nil
	}
	ctx, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	start := time.Now()
	for _, name := range []string{"orders", "refunds"} {
		queue := memqueue.New(name, nil)
		for i := range 5 {
			if _, err := queue.Send(ctx, fmt.Sprintf(`{"id":%d}`, i), nil); err != nil {
				panic(err)
			}
		}
		listener, err := azdispatch.NewListener(queue, handler, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{RateLimit: quota}})
		if err != nil {
			panic(err)
		}
		running.Go(func() { _ = listener.Run(ctx) })
	}
	select {
	case <-tenth:
	case <-time.After(time.Minute):
	}
	fmt.Println("10 calls took at least 90 ms:", time.Since(start) >= 90*time.Millisecond)
	stop()
	running.Wait()
	// Output:
	// 10 calls took at least 90 ms: true
}
