package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Requeue moves poisoned messages back to their queue once the cause is
// fixed, with their original text; a filter picks which.
func ExampleRequeue() {
	ctx := context.Background()
	queue := exampleQueue("invoices")
	publisher, _ := azdispatch.NewPublisher[Order](queue, nil)
	for id := 1; id <= 3; id++ {
		_, _ = publisher.Send(ctx, Order{ID: id})
	}
	// A listener whose downstream is down gives up on all three.
	handled := make(chan struct{}, 3)
	listener, _ := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		handled <- struct{}{}
		return azdispatch.Permanent(errors.New("downstream down"))
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	timeout := time.After(time.Minute)
	for range 3 {
		select {
		case <-handled:
		case <-timeout:
			panic("the messages were not all handled within a minute")
		}
	}
	stop() // Run moves them to the poison queue before it returns
	<-done

	// The downstream is back: requeue all but order 3.
	result, err := azdispatch.Requeue(ctx, queue.PoisonQueue(), queue, &azdispatch.RequeueOptions{
		Filter: func(env *azdispatch.PoisonEnvelope) bool { return !strings.Contains(env.Body, `"id":3`) },
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("moved %d, skipped %d\n", result.Moved, result.Skipped)

	back, _ := queue.Receive(ctx, 32, 30*time.Second)
	fmt.Println("back on the queue:", len(back))
	// Output:
	// moved 2, skipped 1
	// back on the queue: 2
}
