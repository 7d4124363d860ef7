package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Base64(JSON()) writes what the Azure Functions queue trigger reads by
// default, so a Go service and a Functions app can share a queue.
func ExampleBase64() {
	queue := exampleQueue("functions")
	publisher, err := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{
		Codec: azdispatch.Base64(azdispatch.JSON()),
	})
	if err != nil {
		panic(err)
	}
	if _, err := publisher.Send(context.Background(), Order{ID: 7}); err != nil {
		panic(err)
	}
	batch, _ := queue.Receive(context.Background(), 1, 30*time.Second)
	fmt.Println(batch[0].Text)
	// Output:
	// eyJpZCI6N30=
}
