package azdispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch"
)

// An operator pauses a queue while what its handlers call is down: every
// listener of it, in every process, receives nothing within a scale
// interval, and goes on once the pause ends or is resumed.
func ExampleQueue_Pause() {
	ctx := context.Background()
	queue := exampleQueue("paused")

	st, err := queue.Pause(ctx, 30*time.Minute, &azdispatch.PauseOptions{By: "ops: the payments API is down"})
	if err != nil {
		panic(err)
	}
	// Until is at least 30 minutes on (to the second: up to two more).
	fmt.Println("paused for 30m by", st.By, st.Until.Sub(st.Since) >= 30*time.Minute)

	// A listener started now receives nothing until the pause ends.
	listener, err := azdispatch.NewListener(queue, func(context.Context, *azdispatch.Message[Order]) error { return nil }, nil)
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- listener.Run(runCtx) }()
	for {
		if _, on := listener.Paused(); on {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("ready while paused:", listener.Ready() == nil)

	if err := queue.Resume(ctx); err != nil {
		panic(err)
	}
	now, err := queue.PauseState(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("paused after Resume:", !now.Until.IsZero())
	stop()
	fmt.Println("run:", <-done)
	// Output:
	// paused for 30m by ops: the payments API is down true
	// ready while paused: true
	// paused after Resume: false
	// run: <nil>
}
