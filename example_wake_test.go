package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// A push-only listener makes no request while idle: a send through the same
// *Queue in this process starts a dequeuer at once, and the last one stops
// again once its back-off reaches the cap.
func ExampleListenerOptions_pushOnly() {
	ctx, cancel := context.WithCancel(context.Background())
	queue := exampleQueue("push")

	handled := make(chan int, 1)
	stopped := make(chan struct{}, 1)
	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		handled <- m.Body.ID
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			PushOnly: true,
			Wake:     queue, // the publishers are in this process and send through queue
			Idle:     azdispatch.ExponentialIdle(0, 200*time.Millisecond),
		},
		OnEvent: func(e azdispatch.Event) {
			if e.Kind == azdispatch.EventScaleDown && e.Dequeuers == 0 {
				select {
				case stopped <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() { done <- listener.Run(ctx) }()
	select {
	case <-stopped: // the first dequeuer looks once, then stops
	case <-time.After(time.Minute):
		panic("the idle dequeuer did not stop within a minute")
	}
	fmt.Println("dequeuers while idle:", listener.State().ActiveDequeuers)

	publisher, err := azdispatch.NewPublisher[Order](queue, nil)
	if err != nil {
		panic(err)
	}
	if _, err := publisher.Send(ctx, Order{ID: 7}); err != nil {
		panic(err)
	}
	fmt.Println("handled order", <-handled)
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// dequeuers while idle: 0
	// handled order 7
	// run: <nil>
}
