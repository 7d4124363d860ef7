package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// CountTransactions tells what a piece of work cost in billable requests.
func ExampleCountTransactions() {
	ctx := context.Background()
	queue := exampleQueue("costs")
	if err := queue.Create(ctx); err != nil {
		panic(err)
	}
	publisher, _ := azdispatch.NewPublisher[Order](queue, nil)

	counted, c := azdispatch.CountTransactions(ctx)
	for id := range 10 {
		if _, err := publisher.Send(counted, Order{ID: id}); err != nil {
			panic(err)
		}
	}
	if _, err := queue.Receive(counted, 32, 30*time.Second); err != nil {
		panic(err)
	}
	tx := c()
	fmt.Printf("%d sends, %d receive: %d transactions\n", tx.Send, tx.Receive, tx.Total())
	// Output:
	// 10 sends, 1 receive: 11 transactions
}
