package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// A message requeued and poisoned again names the ID it had before
// (PoisonEnvelope.Earlier), so that an operator can follow it from one
// envelope to the next. The ID travels in the message's metadata line, so
// the publisher sends one (here a tenant; otelazdispatch's Propagate sends
// a trace context); a codec's text alone is requeued byte for byte, for
// consumers that know no metadata line.
func ExamplePoisonEnvelope_earlier() {
	ctx := context.Background()
	queue := exampleQueue("payments")
	tenant := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		s.Set("tenant", "contoso") // any metadata: a trace context, with otelazdispatch's Propagate
		return s.Next(ctx)
	})
	publisher, _ := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{tenant},
	})
	_, _ = publisher.Send(ctx, Order{ID: 17})

	// poisonOnce runs a listener that gives up on the message, and returns
	// the envelope it wrote.
	poisonOnce := func() *azdispatch.PoisonEnvelope {
		listener, _ := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
			return azdispatch.Permanent(errors.New("payment declined"))
		}, nil)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- listener.Run(runCtx) }()
		deadline := time.Now().Add(time.Minute)
		for listener.State().Poisoned == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		<-done
		msgs, _ := queue.PoisonQueue().(*azdispatch.Queue).Peek(ctx, 1) // a Queue's poison queue is a *Queue
		env, _ := azdispatch.ParsePoison(msgs[0].Text)
		return env
	}

	first := poisonOnce()
	fmt.Println("first time, earlier IDs:", len(first.Earlier))
	_, _ = azdispatch.Requeue(ctx, queue.PoisonQueue(), queue, nil)
	second := poisonOnce()
	fmt.Println("second time, a new ID:", second.MessageID != first.MessageID)
	fmt.Println("it names the first:", len(second.Earlier) == 1 && second.Earlier[0] == first.MessageID)
	// Output:
	// first time, earlier IDs: 0
	// second time, a new ID: true
	// it names the first: true
}
