package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// workers are listeners, each on its own subset of the shards.
type workers struct {
	listeners []*azdispatch.Listener[Job]
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	// allHandled is closed when every job has been handled once.
	allHandled chan struct{}

	mu        sync.Mutex
	jobs      int
	seen      map[int]int    // job → times handled
	byShard   map[string]int // shard → jobs handled
	customers map[string]map[int]bool
}

// startWorkers starts n workers, which close allHandled once they have
// handled jobs distinct jobs.
func startWorkers(ctx context.Context, tasks *azdispatch.ShardedQueue, n, jobs int) (*workers, error) {
	w := &workers{
		allHandled: make(chan struct{}), jobs: jobs,
		seen: map[int]int{}, byShard: map[string]int{}, customers: map[string]map[int]bool{},
	}
	if jobs == 0 {
		close(w.allHandled)
	}
	ctx, w.cancel = context.WithCancel(ctx)
	for i := range n {
		mine, err := tasks.Subset(i, n)
		if err != nil {
			w.stop()
			return nil, err
		}
		l, err := azdispatch.NewListener(mine, func(_ context.Context, m *azdispatch.Message[Job]) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.seen[m.Body.Seq]++
			if w.seen[m.Body.Seq] == 1 && len(w.seen) == w.jobs {
				close(w.allHandled)
			}
			w.byShard[m.Queue]++
			if w.customers[m.Body.Customer] == nil {
				w.customers[m.Body.Customer] = map[int]bool{}
			}
			w.customers[m.Body.Customer][i] = true
			return nil
		}, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, time.Second)}})
		if err != nil {
			w.stop()
			return nil, err
		}
		w.listeners = append(w.listeners, l)
		w.wg.Go(func() { _ = l.Run(ctx) })
	}
	return w, nil
}

func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
}

// report prints where the jobs went and checks that each was handled once,
// and each customer by one worker.
func (w *workers) report(c config, published [2]int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Printf("published: distributor 0 %d, distributor 1 %d\n", published[0], published[1])
	names := make([]string, 0, len(w.byShard))
	for name := range w.byShard {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("  shard %-20s %5d jobs\n", name, w.byShard[name])
	}
	for i, l := range w.listeners {
		s := l.State()
		fmt.Printf("worker %d: %d handled, %d requests\n", i, s.Succeeded, s.Transactions.Total())
	}
	dups, split := 0, 0
	for _, n := range w.seen {
		dups += n - 1
	}
	for _, who := range w.customers {
		if len(who) > 1 {
			split++
		}
	}
	fmt.Printf("customers seen by more than one worker: %d; jobs handled twice: %d\n", split, dups)
	if published[0]+published[1] != c.jobs || len(w.seen) != c.jobs {
		return fmt.Errorf("published %d and handled %d of %d jobs", published[0]+published[1], len(w.seen), c.jobs)
	}
	if split > 0 {
		return fmt.Errorf("%d customers were handled by more than one worker", split)
	}
	fmt.Printf("every job accounted for: %d published, %d handled\n", c.jobs, len(w.seen))
	return nil
}
