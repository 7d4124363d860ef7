package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A message scheduled 30 days ahead, further than the service can hide
// one: a listener that receives it before it is due hides it again, a week
// at a time, and handles it once it is due. Over memqueue, a test moves the
// queue's clock and sees it all in milliseconds.
func ExamplePublisher_SendAfter() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	q := memqueue.New("trials", &memqueue.Options{Clock: clock})
	pub, err := azdispatch.NewPublisher[string](q, nil)
	if err != nil {
		panic(err)
	}
	s, err := pub.SendAfter(ctx, "trial ends", 30*24*time.Hour)
	if err != nil {
		panic(err)
	}
	fmt.Println("due", s.Due.Format(time.DateTime))

	handled := make(chan string, 1)
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		handled <- fmt.Sprintf("%q handled at %s, delivery %d", m.Body, q.ServiceTime().Format(time.DateTime), m.DequeueCount)
		return nil
	}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 10*time.Millisecond)}})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()

	for week := int64(1); clock.Now().Add(7 * 24 * time.Hour).Before(s.Due); week++ {
		clock.Advance(7 * 24 * time.Hour) // the message shows up, not yet due
		for l.State().Rehidden < week {
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Println("hidden again", l.State().Rehidden, "times")
	clock.Advance(s.Due.Sub(clock.Now()))
	fmt.Println(<-handled)
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	// Output:
	// due 2026-01-31 09:00:00
	// hidden again 4 times
	// "trial ends" handled at 2026-01-31 09:00:00, delivery 1
}
