package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/azdispatch/azdispatch"
)

type Order struct {
	ID int `json:"id"`
}

// connectionString is the storage account the examples use: in a program of
// yours, your account's connection string, or os.Getenv of a variable that
// holds it. Here it is the test run's Azurite, started on first use.
func connectionString() string {
	azdispatch.StartTestEmulator()
	return os.Getenv("AZDISPATCH_CONNECTION_STRING")
}

// exampleQueue opens a fresh queue in the examples' account.
func exampleQueue(prefix string) *azdispatch.Queue {
	account, err := azdispatch.NewAccountFromConnectionString(connectionString(), nil)
	if err != nil {
		panic(err)
	}
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	queue, err := account.Queue(name)
	if err != nil {
		panic(err)
	}
	// A listener does not create the queue it reads from: create it here,
	// through another client so that the examples' counts start at zero.
	other, err := azdispatch.NewAccountFromConnectionString(connectionString(), nil)
	if err != nil {
		panic(err)
	}
	q, err := other.Queue(name)
	if err != nil {
		panic(err)
	}
	if err := q.Create(context.Background()); err != nil {
		panic(err)
	}
	return queue
}

// A publisher sends typed messages; a listener handles each and deletes it.
func Example() {
	ctx := context.Background()
	queue := exampleQueue("orders")

	publisher, err := azdispatch.NewPublisher[Order](queue, nil)
	if err != nil {
		panic(err)
	}
	for id := 1; id <= 3; id++ {
		if _, err := publisher.Send(ctx, Order{ID: id}); err != nil {
			panic(err)
		}
	}

	handled := make(chan int)
	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		handled <- m.Body.ID
		return nil // delete it
	}, nil)
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()

	ids := []int{<-handled, <-handled, <-handled}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	slices.Sort(ids)
	fmt.Println("handled orders", ids)
	fmt.Println("succeeded:", listener.State().Succeeded)
	// Output:
	// handled orders [1 2 3]
	// succeeded: 3
}

// A handler returns Permanent for a message no retry can fix: it goes to the
// poison queue at once, with the reason.
func ExamplePermanent() {
	ctx := context.Background()
	queue := exampleQueue("payments")
	publisher, _ := azdispatch.NewPublisher[Order](queue, nil)
	if _, err := publisher.Send(ctx, Order{ID: 42}); err != nil {
		panic(err)
	}

	handled := make(chan struct{}, 1)
	listener, _ := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		handled <- struct{}{}
		return azdispatch.Permanent(errors.New("card expired"))
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	select {
	case <-handled:
	case <-time.After(time.Minute):
		panic("the message was not handled within a minute")
	}
	stop() // Run moves the message to the poison queue before it returns
	<-done

	batch, err := queue.PoisonQueue().Receive(ctx, 1, 30*time.Second)
	if err != nil {
		panic(err)
	}
	envelope, err := azdispatch.ParsePoison(batch[0].Text)
	if err != nil {
		panic(err)
	}
	fmt.Println(envelope.Body)
	fmt.Println(envelope.Reason)
	// Output:
	// {"id":42}
	// permanent: card expired
}
