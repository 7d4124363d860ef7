package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// trickle is a steady producer: one goroutine sends a message numbered 1,
// 2, 3 … every 1/rate seconds, each after the one before has been
// written, so that the numbers are the messages' order in the queue.
type trickle struct {
	started, done atomic.Int64 // sends begun, and sends written: the numbers 1 to done are in the queue
	halt          chan struct{}
	wg            sync.WaitGroup
	err           error // the send that failed, if one did; read after wg
}

// startTrickle starts sending to q at rate messages a second until end.
func startTrickle(ctx context.Context, q *azdispatch.Queue, rate float64) (*trickle, error) {
	p, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	if err != nil {
		return nil, err
	}
	t := &trickle{halt: make(chan struct{})}
	every := time.Duration(float64(time.Second) / rate)
	t.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-t.halt:
				return
			case <-ctx.Done():
				t.err = ctx.Err()
				return
			case <-tick.C:
			}
			// Not cut short by end: a send cut off might or might not
			// have been written, and its message would be neither sent
			// nor not.
			n := t.started.Add(1)
			if _, err := p.Send(ctx, strconv.FormatInt(n, 10)); err != nil {
				t.err = fmt.Errorf("sending message %d: %w", n, err)
				return
			}
			t.done.Add(1)
		}
	})
	return t, nil
}

// end stops the sends, waits for the one under way, and returns how many
// were written, or the error that stopped them earlier.
func (t *trickle) end() (int, error) {
	select {
	case <-t.halt:
	default:
		close(t.halt)
	}
	t.wg.Wait()
	return int(t.done.Load()), t.err
}
