package azdispatch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// SendBatch puts many items in one compressed blob and one pointer message;
// the listener calls the handler once per item, with the batch id and index.
func ExamplePublisher_SendBatch() {
	ctx := context.Background()
	queue := exampleQueue("batched")
	publisher, err := azdispatch.NewPublisher[Order](queue, nil)
	if err != nil {
		panic(err)
	}
	sent, err := publisher.SendBatch(ctx, []Order{{ID: 1}, {ID: 2}, {ID: 3}}, nil)
	if err != nil {
		panic(err)
	}

	var mu sync.Mutex
	var seen []string
	handled := make(chan struct{}, sent.Items)
	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("item %d: order %d, same batch: %v", m.Item, m.Body.ID, m.BatchID == sent.BatchID))
		handled <- struct{}{}
		return nil
	}, nil)
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	timeout := time.After(time.Minute)
	for range sent.Items {
		select {
		case <-handled:
		case <-timeout:
			panic("the batch's items were not all handled within a minute")
		}
	}
	stop() // Run deletes the batch's message and blob before it returns
	<-done

	slices.Sort(seen)
	fmt.Println(strings.Join(seen, "\n"))
	s := listener.State()
	fmt.Printf("%d message, %d items; blob reads %d, blob deletes %d\n", s.Succeeded, s.ItemsSucceeded, s.Transactions.BlobRead, s.Transactions.BlobDelete)
	// Output:
	// item 0: order 1, same batch: true
	// item 1: order 2, same batch: true
	// item 2: order 3, same batch: true
	// 1 message, 3 items; blob reads 1, blob deletes 1
}

// A message too large for a queue goes to the payload store, and a pointer
// goes on the queue in its place (a claim check). The handler cannot tell.
func ExamplePublisher_Send_largeMessage() {
	ctx := context.Background()
	queue := exampleQueue("documents")
	publisher, _ := azdispatch.NewPublisher[string](queue, nil)
	document := strings.Repeat("All work and no play. ", 50_000) // 1.1 MB
	if _, err := publisher.Send(ctx, document); err != nil {
		panic(err)
	}

	got := make(chan string, 1)
	listener, _ := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[string]) error {
		got <- m.Body
		return nil
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	body := <-got
	stop()
	<-done
	fmt.Println("received", len(body), "bytes, intact:", body == document)
	// Output:
	// received 1100000 bytes, intact: true
}

// Sweep removes payload blobs that no message can point at any more; a
// payload whose message may still be on the queue is kept.
func ExampleSweep() {
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(connectionString(), nil)
	if err != nil {
		panic(err)
	}
	store, err := account.PayloadStore(fmt.Sprintf("payloads-%d", time.Now().UnixNano()))
	if err != nil {
		panic(err)
	}
	queue := exampleQueue("swept")
	publisher, _ := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{Payloads: store})
	if _, err := publisher.SendBatch(ctx, []Order{{ID: 1}, {ID: 2}}, nil); err != nil {
		panic(err)
	}

	result, err := azdispatch.Sweep(ctx, store, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("scanned %d, deleted %d, live %d\n", result.Scanned, result.Deleted, result.Live)
	// Output:
	// scanned 1, deleted 0, live 1
}
