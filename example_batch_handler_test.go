package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// A batch handler takes a receive's messages in one call (a bulk insert,
// a vendor API that takes many items) and says what became of each: here
// the cancelled order is refused for good, and poisoned alone; the others
// are deleted.
func ExampleNewBatchListener() {
	ctx := context.Background()
	queue := exampleQueue("bulk")
	publisher, err := azdispatch.NewPublisher[Order](queue, nil)
	if err != nil {
		panic(err)
	}
	for _, o := range []Order{{ID: 1}, {ID: 2}, {ID: 3}} {
		if _, err := publisher.Send(ctx, o); err != nil {
			panic(err)
		}
	}

	calls := make(chan int, 10)
	listener, err := azdispatch.NewBatchListener(queue, func(ctx context.Context, msgs []*azdispatch.Message[Order]) error {
		errs := make([]error, len(msgs))
		for i, m := range msgs {
			if m.Body.ID == 2 {
				errs[i] = azdispatch.Permanent(errors.New("order 2 was cancelled"))
			}
		}
		calls <- len(msgs)
		return azdispatch.PerMessage(errs)
	}, &azdispatch.ListenerOptions{Batch: azdispatch.BatchOptions{MaxItems: 10, MaxWait: 100 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	select {
	case n := <-calls:
		fmt.Println("one call of", n, "messages")
	case <-time.After(time.Minute):
		panic("no call within a minute")
	}
	for listener.State().InFlight > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	s := listener.State()
	fmt.Printf("%d deleted, %d poisoned\n", s.Succeeded, s.Poisoned)
	// Output:
	// one call of 3 messages
	// 2 deleted, 1 poisoned
}
