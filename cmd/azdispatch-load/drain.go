package main

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// drainRun is what one variant did in one run.
type drainRun struct {
	processed int
	elapsed   time.Duration
	requests  int64 // receives (empty ones included), deletes, updates and depth reads: sends are not counted

	emulatorCPU, clientCPU time.Duration // used during the run (the emulator's is 0 for a real account)
}

// drainer consumes until n messages are processed or the deadline passes.
type drainer func(ctx context.Context, cs, queue string, n int, latency time.Duration, deadline time.Time) (drainRun, error)

// drainVariants are compared in the drain scenario, in this order.
var drainVariants = []struct {
	name  string
	drain drainer
}{
	{"listener", drainListener},
	{"raw-sequential", func(ctx context.Context, cs, q string, n int, lat time.Duration, dl time.Time) (drainRun, error) {
		return drainRaw(ctx, cs, q, n, lat, dl, false)
	}},
	{"raw-parallel", func(ctx context.Context, cs, q string, n int, lat time.Duration, dl time.Time) (drainRun, error) {
		return drainRaw(ctx, cs, q, n, lat, dl, true)
	}},
	{"one-at-a-time", drainOneAtATime},
}

// drainListener is the Listener with its default configuration.
func drainListener(ctx context.Context, cs, queue string, n int, latency time.Duration, deadline time.Time) (drainRun, error) {
	q, err := openQueue(cs, queue, latency)
	if err != nil {
		return drainRun{}, err
	}
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[payload]) error { return nil }, nil)
	if err != nil {
		return drainRun{}, err
	}
	start := time.Now()
	stop := runListener(ctx, l)
	end := waitUntil(deadline, func() bool { return l.State().Succeeded >= int64(n) })
	s := l.State()
	if err := stop(); err != nil {
		return drainRun{}, err
	}
	tx := s.Transactions
	return drainRun{processed: int(s.Succeeded), elapsed: end.Sub(start), requests: tx.Receive + tx.Delete + tx.Update + tx.Depth}, nil
}

// rawClient is an azqueue client over the same transport the listener uses,
// counting its HTTP attempts.
func rawClient(cs, queue string, latency time.Duration) (*azqueue.QueueClient, *attempts, error) {
	a := &attempts{}
	c, err := azqueue.NewQueueClientFromConnectionString(cs, queue, &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport:        latencyTransport{next: newHTTPClient(), delay: latency},
		PerRetryPolicies: []policy.Policy{a},
	}})
	return c, a, err
}

// handle is the work every variant does per message: decode it.
func handle(text *string) bool {
	var p payload
	return text != nil && json.Unmarshal([]byte(*text), &p) == nil
}

// drainRaw is a hand-written loop: receive 32, handle each, delete them one
// after another or all at once, repeat; 100 ms pause after an empty receive.
func drainRaw(ctx context.Context, cs, queue string, n int, latency time.Duration, deadline time.Time, parallel bool) (drainRun, error) {
	c, a, err := rawClient(cs, queue, latency)
	if err != nil {
		return drainRun{}, err
	}
	var processed atomic.Int64
	del := func(m *azqueue.DequeuedMessage) {
		if handle(m.MessageText) {
			if _, err := c.DeleteMessage(ctx, *m.MessageID, *m.PopReceipt, nil); err == nil {
				processed.Add(1)
			}
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(loopDone)
		opts := &azqueue.DequeueMessagesOptions{NumberOfMessages: to.Ptr(int32(32)), VisibilityTimeout: to.Ptr(int32(30))}
		for runCtx.Err() == nil {
			resp, err := c.DequeueMessages(runCtx, opts)
			if err != nil || len(resp.Messages) == 0 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if !parallel {
				for _, m := range resp.Messages {
					del(m)
				}
				continue
			}
			var wg sync.WaitGroup
			for _, m := range resp.Messages {
				wg.Go(func() { del(m) })
			}
			wg.Wait()
		}
	}()
	end := waitUntil(deadline, func() bool { return processed.Load() >= int64(n) })
	got := processed.Load()
	stop()
	<-loopDone
	return drainRun{processed: int(got), elapsed: end.Sub(start), requests: a.get.Load() + a.delete.Load() + a.put.Load()}, nil
}

// drainOneAtATime receives one message per request, handles and deletes it,
// as the Dapr Azure Storage Queues binding does.
func drainOneAtATime(ctx context.Context, cs, queue string, n int, latency time.Duration, deadline time.Time) (drainRun, error) {
	c, a, err := rawClient(cs, queue, latency)
	if err != nil {
		return drainRun{}, err
	}
	var processed atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(loopDone)
		opts := &azqueue.DequeueMessageOptions{VisibilityTimeout: to.Ptr(int32(30))}
		for runCtx.Err() == nil {
			resp, err := c.DequeueMessage(runCtx, opts)
			if err != nil || len(resp.Messages) == 0 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			m := resp.Messages[0]
			if handle(m.MessageText) {
				if _, err := c.DeleteMessage(runCtx, *m.MessageID, *m.PopReceipt, nil); err == nil {
					processed.Add(1)
				}
			}
		}
	}()
	end := waitUntil(deadline, func() bool { return processed.Load() >= int64(n) })
	got := processed.Load()
	stop()
	<-loopDone
	return drainRun{processed: int(got), elapsed: end.Sub(start), requests: a.get.Load() + a.delete.Load() + a.put.Load()}, nil
}
