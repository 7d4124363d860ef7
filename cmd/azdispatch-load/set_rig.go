package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// The priority and fairness scenarios run a listener over a queue set of
// memqueues in this process: what they measure is how the set shares one
// handler budget, which no emulator's pace should blur. A message's text
// is the time it was sent, in Unix nanoseconds by this machine's clock,
// so that its wait is measured to the microsecond (the service's and
// memqueue's insertion times are whole seconds).

// setRun is a listener over a set, and what its handler saw.
type setRun struct {
	queues []*memqueue.Queue
	set    *azdispatch.QueueSet

	mu      sync.Mutex
	handled map[string]int             // per queue
	waits   map[string][]time.Duration // per queue: send to handler start
	order   []string                   // the queue of each handler call, in order
}

// newSetRun makes n memqueues called prefix-0 to prefix-(n−1), with
// wake-ups unless noWake, and a set over them.
func newSetRun(prefix string, members []azdispatch.SetMember, noWake bool, opts *azdispatch.QueueSetOptions) (*setRun, error) {
	r := &setRun{handled: map[string]int{}, waits: map[string][]time.Duration{}}
	for i := range members {
		q := memqueue.New(fmt.Sprintf("%s-%d", prefix, i), nil)
		r.queues = append(r.queues, q)
		members[i].Queue = q
		if noWake {
			members[i].Queue = withoutWake{Shard: q, q: q}
		}
	}
	set, err := azdispatch.NewQueueSet(prefix, members, opts)
	r.set = set
	return r, err
}

// withoutWake is a queue that offers no wake-ups: the set then finds a
// message only by reading. It keeps the queue's poison queue.
type withoutWake struct {
	azdispatch.Shard
	q *memqueue.Queue
}

func (w withoutWake) PoisonQueue() azdispatch.Shard { return w.q.PoisonQueue() }

// send puts n messages on queue i, each its send time.
func (r *setRun) send(ctx context.Context, i, n int) error {
	for range n {
		if _, err := r.queues[i].Send(ctx, strconv.FormatInt(time.Now().UnixNano(), 10), nil); err != nil {
			return err
		}
	}
	return nil
}

// handler records each call and its wait, then holds it for hold.
func (r *setRun) handler(hold time.Duration) azdispatch.Handler[int64] {
	return func(ctx context.Context, m *azdispatch.Message[int64]) error {
		wait := time.Since(time.Unix(0, m.Body))
		r.mu.Lock()
		r.handled[m.Queue]++
		r.waits[m.Queue] = append(r.waits[m.Queue], wait)
		r.order = append(r.order, m.Queue)
		r.mu.Unlock()
		if hold > 0 {
			time.Sleep(hold)
		}
		return nil
	}
}

// listen runs a listener on the set until ctx ends; wait waits for it.
func (r *setRun) listen(ctx context.Context, hold time.Duration, opts *azdispatch.ListenerOptions) (wait func() error, err error) {
	l, err := azdispatch.NewListener(r.set, r.handler(hold), opts)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return func() error { return <-done }, nil
}

// requests is the requests made to the set's queues so far.
func (r *setRun) requests() int64 {
	var n int64
	for _, q := range r.queues {
		n += q.Transactions().Total()
	}
	return n
}

// total is the handler calls so far.
func (r *setRun) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// first counts, per queue, the first n handler calls.
func (r *setRun) first(n int) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, q := range r.order[:min(n, len(r.order))] {
		out[q]++
	}
	return out
}

// waitsOf returns queue i's waits, sorted.
func (r *setRun) waitsOf(i int) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := slices.Clone(r.waits[r.queues[i].Name()])
	slices.Sort(w)
	return w
}

// durationQuantile is the q-quantile of sorted ws (nearest rank); 0
// without any.
func durationQuantile(ws []time.Duration, q float64) time.Duration {
	if len(ws) == 0 {
		return 0
	}
	k := int(float64(len(ws))*q+0.999999) - 1
	return ws[min(max(k, 0), len(ws)-1)]
}

// until polls cond until it holds or ctx ends.
func until(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
