package azdispatch_test

import (
	"context"
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
	// Poison all three, as a listener whose downstream was down would.
	batch, _ := queue.Receive(ctx, 3, 30*time.Second)
	for _, d := range batch {
		text, _ := (&azdispatch.PoisonEnvelope{Queue: queue.Name(), MessageID: d.ID, Reason: "downstream down", Body: d.Text}).Encode()
		_, _ = queue.PoisonQueue().Send(ctx, text, nil)
		_ = queue.Delete(ctx, d)
	}

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
