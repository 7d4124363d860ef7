// Package overhead measures what the Listener itself costs per message: it
// drains a source through a Listener with its defaults and through minimal
// hand-written loops, with the same messages and the same handler, and
// reports CPU time, allocations and bytes per message and the rate for
// each. The source is a memqueue filled in advance ([Fill]) or a [Stream]
// that makes its messages as they are received; neither has any storage
// time, so what differs between the variants is the consumer's own work.
//
// The root package's BenchmarkOverhead and the load test's overhead
// scenario both run it.
package overhead

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/cputime"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Order is the message body: about 230 bytes of JSON, a typical small
// work item.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Quantity int     `json:"quantity"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Note     string  `json:"note"`
}

// Text is the JSON of the message every run sends.
var Text = func() string {
	b, err := json.Marshal(Order{
		ID: "ord-000000000001", Customer: "cust-4711", Quantity: 3, Amount: 129.95, Currency: "EUR",
		Note: "leave at the door; ring twice; the dog is friendly and the parcel may be left with a neighbour; call ahead on weekends",
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// handle is the handler both variants run: it does nothing, so that all
// that is measured is the way to it and back.
func handle(_ context.Context, o *Order) error {
	if o.ID == "" {
		return fmt.Errorf("empty order")
	}
	return nil
}

// Variants.
const (
	Listener = "listener" // an azdispatch.Listener with its defaults
	// ListenerMiddleware is Listener with one middleware that only calls
	// on: what the middleware seam costs when it is used.
	ListenerMiddleware = "listener-mw"
	// ListenerBatch is a batch listener with its defaults: one call per
	// receive, the handler run for each of its messages in turn.
	ListenerBatch = "listener-batch"
	Raw           = "raw"      // receive 32, a goroutine per message under a 64-wide semaphore, decode, delete
	RawPool       = "raw-pool" // the same on 64 goroutines that live for the whole drain
	// RawLoop is the floor: one goroutine that receives 32, decodes each
	// message, calls the handler and deletes it, in turn. No handoff
	// between goroutines at all: what any consumer must spend per message.
	RawLoop = "raw-loop"
)

// Variants are the variants in the order they are reported.
var Variants = []string{Listener, ListenerMiddleware, ListenerBatch, Raw, RawPool, RawLoop}

// Result is one drain.
type Result struct {
	Variant      string
	Messages     int
	Elapsed      time.Duration
	CPU          time.Duration // the whole process's, user and system
	Allocs       uint64        // heap allocations, all goroutines
	Bytes        uint64        // heap bytes allocated
	CPUPerMsg    float64       // µs
	AllocsPerMsg float64
	BytesPerMsg  float64
	MsgsPerS     float64
}

// Fill returns a memqueue holding n copies of Text.
func Fill(ctx context.Context, n int) (*memqueue.Queue, error) {
	q := memqueue.New("overhead", nil)
	for range n {
		if _, err := q.Send(ctx, Text, nil); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// DrainListener drains q, which holds n messages, with a Listener made with
// opts, and measures it: for a benchmark of a listener's options (a
// middleware, say) against the defaults.
func DrainListener(ctx context.Context, q azdispatch.Source, n int, opts *azdispatch.ListenerOptions) (Result, error) {
	return measure(ctx, Listener, q, n, func(ctx context.Context, q azdispatch.Source, n int) error {
		return drainListener(ctx, q, n, opts)
	})
}

// Drain drains q, which holds n messages, with variant and measures it.
func Drain(ctx context.Context, variant string, q azdispatch.Source, n int) (Result, error) {
	drain := map[string]func(context.Context, azdispatch.Source, int) error{
		Listener: func(ctx context.Context, q azdispatch.Source, n int) error { return drainListener(ctx, q, n, nil) },
		ListenerMiddleware: func(ctx context.Context, q azdispatch.Source, n int) error {
			return drainListener(ctx, q, n, &azdispatch.ListenerOptions{Middleware: []azdispatch.Middleware{azdispatch.MiddlewareFunc(passThrough)}})
		},
		ListenerBatch: drainBatchListener,
		Raw:           drainRaw, RawPool: drainRawPool, RawLoop: drainRawLoop,
	}[variant]
	if drain == nil {
		return Result{}, fmt.Errorf("overhead: unknown variant %q", variant)
	}
	return measure(ctx, variant, q, n, drain)
}

// measure runs drain over q and measures its time, CPU and allocations.
func measure(ctx context.Context, variant string, q azdispatch.Source, n int, drain func(context.Context, azdispatch.Source, int) error) (Result, error) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, err := cputime.Self()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	if err := drain(ctx, q, n); err != nil {
		return Result{}, err
	}
	elapsed := time.Since(start)
	cpu1, err := cputime.Self()
	if err != nil {
		return Result{}, err
	}
	runtime.ReadMemStats(&m1)
	r := Result{
		Variant: variant, Messages: n, Elapsed: elapsed, CPU: cpu1 - cpu0,
		Allocs: m1.Mallocs - m0.Mallocs, Bytes: m1.TotalAlloc - m0.TotalAlloc,
	}
	per := float64(n)
	r.CPUPerMsg = float64(r.CPU.Microseconds()) / per
	r.AllocsPerMsg, r.BytesPerMsg = float64(r.Allocs)/per, float64(r.Bytes)/per
	r.MsgsPerS = per / elapsed.Seconds()
	return r, nil
}

// passThrough is a middleware that does nothing but call on.
func passThrough(ctx context.Context, c *azdispatch.Call) error { return c.Next(ctx) }

// drainListener runs a Listener with opts until n messages are handled and
// deleted, then stops it.
func drainListener(ctx context.Context, q azdispatch.Source, n int, opts *azdispatch.ListenerOptions) error {
	if _, ok := q.(*Stream); ok {
		// A stream has no poison queue of its own; nothing is poisoned
		// in a drain, but a listener needs one.
		o := azdispatch.ListenerOptions{}
		if opts != nil {
			o = *opts
		}
		o.PoisonQueue = memqueue.New("overhead-poison", nil)
		opts = &o
	}
	var handled atomic.Int64
	done := make(chan struct{})
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		err := handle(ctx, &m.Body)
		if handled.Add(1) == int64(n) {
			close(done)
		}
		return err
	}, opts)
	if err != nil {
		return err
	}
	return runUntilSettled(ctx, l, n, done)
}

// drainBatchListener is drainListener with a batch listener, whose
// handler runs handle for each message of a call in turn.
func drainBatchListener(ctx context.Context, q azdispatch.Source, n int) error {
	var opts *azdispatch.ListenerOptions
	if _, ok := q.(*Stream); ok {
		opts = &azdispatch.ListenerOptions{PoisonQueue: memqueue.New("overhead-poison", nil)}
	}
	var handled atomic.Int64
	done := make(chan struct{})
	l, err := azdispatch.NewBatchListener(q, func(ctx context.Context, msgs []*azdispatch.Message[Order]) error {
		errs := make([]error, len(msgs))
		for i, m := range msgs {
			errs[i] = handle(ctx, &m.Body)
		}
		if handled.Add(int64(len(msgs))) == int64(n) {
			close(done)
		}
		return azdispatch.PerMessage(errs)
	}, opts)
	if err != nil {
		return err
	}
	return runUntilSettled(ctx, l, n, done)
}

// runUntilSettled runs l until done is closed and n messages are settled.
func runUntilSettled(ctx context.Context, l *azdispatch.Listener[Order], n int, done chan struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var run sync.WaitGroup
	var runErr error
	run.Go(func() { runErr = l.Run(ctx) })
	select {
	case <-done:
	case <-ctx.Done():
	}
	// The last deletes follow the last handler calls.
	for l.State().Succeeded < int64(n) && ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	run.Wait()
	if s := l.State(); s.Succeeded != int64(n) {
		return fmt.Errorf("overhead: listener settled %d of %d messages (%+v)", s.Succeeded, n, s)
	}
	return runErr
}

// handleRaw is the raw loops' work on one message; it reports success.
func handleRaw(ctx context.Context, q azdispatch.Source, d *azdispatch.Delivery) bool {
	var o Order
	if err := json.Unmarshal([]byte(d.Text), &o); err != nil {
		return false
	}
	return handle(ctx, &o) == nil && q.Delete(ctx, d) == nil
}

// rawTally counts what the raw loops' goroutines did.
type rawTally struct{ deleted, failed atomic.Int64 }

func (t *rawTally) record(ok bool) {
	if ok {
		t.deleted.Add(1)
	} else {
		t.failed.Add(1)
	}
}

// receiveAll is the raw loops' one receive loop: it receives 32 at a time
// and gives each message to give, until n are deleted or failed.
func receiveAll(ctx context.Context, q azdispatch.Source, n int, t *rawTally, give func(*azdispatch.Delivery)) error {
	for t.deleted.Load()+t.failed.Load() < int64(n) {
		batch, err := q.Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			// All received; the last ones are still being handled.
			time.Sleep(100 * time.Microsecond)
			continue
		}
		for _, d := range batch {
			give(d)
		}
	}
	if f := t.failed.Load(); f > 0 {
		return fmt.Errorf("overhead: raw loop failed %d of %d messages", f, n)
	}
	return nil
}

// rawWidth is how many messages the raw loops handle at once.
const rawWidth = 64

// drainRaw is the loop the listener was first measured against: a
// goroutine per message under a semaphore.
func drainRaw(ctx context.Context, q azdispatch.Source, n int) error {
	sem := make(chan struct{}, rawWidth)
	var wg sync.WaitGroup
	defer wg.Wait()
	var t rawTally
	return receiveAll(ctx, q, n, &t, func(d *azdispatch.Delivery) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.record(handleRaw(ctx, q, d))
		})
	})
}

// drainRawPool is drainRaw without a goroutine per message: 64 goroutines
// take messages from a channel, so their stacks, once grown, serve every
// message after. It is the lowest floor we know how to write.
func drainRawPool(ctx context.Context, q azdispatch.Source, n int) error {
	work := make(chan *azdispatch.Delivery)
	var wg sync.WaitGroup
	var t rawTally
	for range rawWidth {
		wg.Go(func() {
			for d := range work {
				t.record(handleRaw(ctx, q, d))
			}
		})
	}
	defer wg.Wait()
	defer close(work)
	return receiveAll(ctx, q, n, &t, func(d *azdispatch.Delivery) { work <- d })
}

// drainRawLoop is the floor the listener is measured against: a single
// goroutine that receives 32 and takes each message through decode,
// handler and delete before the next, with no goroutine, channel or
// semaphore between the receive and the handler.
func drainRawLoop(ctx context.Context, q azdispatch.Source, n int) error {
	done := 0
	for done < n {
		batch, err := q.Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return fmt.Errorf("overhead: the queue ran dry after %d of %d messages", done, n)
		}
		for _, d := range batch {
			if !handleRaw(ctx, q, d) {
				return fmt.Errorf("overhead: raw loop failed message %s", d.ID)
			}
			done++
		}
	}
	return nil
}
