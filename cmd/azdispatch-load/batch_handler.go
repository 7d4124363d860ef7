package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// The batch-handler scenario: a handler for many messages at once, judged.
//
//   - per-receive: no window. A queue of messages drained by a batch
//     listener and, on a queue of its own on the same emulator, by a
//     listener for one message at a time with the same options: the batch
//     listener must make no request per message more (a receive per 32, a
//     delete each), and one call per receive that brought messages.
//   - window-load: MaxItems 100 and MaxWait 2 s over a full queue: full
//     calls form within MaxWait and one receive.
//   - window-trickle: the same window while 20 messages a second come in:
//     calls close at MaxWait with what they have, within MaxWait and one
//     receive.
//
// In both windows the visibility timeout is 2 s, so that messages wait
// past half of it and are renewed: at most one renewal per message per
// half visibility timeout it was held.
//
// Each run has an emulator of its own: one that has deleted thousands of
// messages stops answering for seconds to clean them up.

// batchHandlerConfig sizes the scenario; a test shrinks it.
type batchHandlerConfig struct {
	Messages int           // per-receive and window-load: the queue's messages
	Trickle  time.Duration // window-trickle: how long messages come in
	Rate     int           // window-trickle: messages a second
	Hold     time.Duration // a call's time
	// Margin is how late past MaxWait and a receive a call may start (the
	// timer's goroutine, a call's place), and how much longer than it was
	// seen a message may have been held (from its receive to its delete).
	// A loaded test machine needs more.
	Margin time.Duration
}

func (c batchHandlerConfig) withDefaults() batchHandlerConfig {
	setIf(&c.Messages, 1000)
	setIf(&c.Trickle, 20*time.Second)
	setIf(&c.Rate, 20)
	setIf(&c.Hold, 50*time.Millisecond)
	setIf(&c.Margin, 250*time.Millisecond)
	return c
}

// The window variants' options.
const (
	batchWindowItems = 100
	batchWindowWait  = 2 * time.Second
	batchVisibility  = 2 * time.Second
)

// batchHandlerRecord is one line of the scenario's -json output.
type batchHandlerRecord struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	OK       bool   `json:"ok"`

	Messages  int     `json:"messages"`
	Calls     int64   `json:"calls"`
	MeanCall  float64 `json:"mean_call"` // messages per call
	FullCalls int     `json:"full_calls"`
	MaxItems  int     `json:"max_items"`
	MaxWaitMS float64 `json:"max_wait_ms,omitempty"`
	Lost      int     `json:"lost"`     // sent, never handled
	Repeated  int     `json:"repeated"` // handled more than once

	// per-receive: requests per message, the baseline's and this one's,
	// and the receives that brought messages.
	TxPerMsg       float64 `json:"tx_per_msg"`
	SingleTxPerMsg float64 `json:"single_tx_per_msg,omitempty"`
	FullReceives   int64   `json:"receives_with_messages,omitempty"`

	// Windows: the longest a call's first message waited in it (from
	// when it reached the handler's end of its way to the call), that of
	// the calls that filled up, the slowest receive, and the bound the
	// first two are held to (MaxWait and the slowest receive).
	FormedMaxMS     float64 `json:"formed_max_ms,omitempty"`
	FullFormedMaxMS float64 `json:"full_formed_max_ms,omitempty"`
	ReceiveMaxMS    float64 `json:"receive_max_ms,omitempty"`
	FormBoundMS     float64 `json:"form_bound_ms,omitempty"`
	// Renewals (Update Message while held), and the most allowed: for
	// each message, its time held over half the visibility timeout.
	Renewals     int64 `json:"renewals"`
	RenewalBound int64 `json:"renewal_bound,omitempty"`
}

// batchWatch is what the scenario sees of a listener: when each message
// reached the handler's end of its way (a middleware's call), the calls,
// and the slowest receive.
type batchWatch struct {
	mu       sync.Mutex
	joined   map[string]time.Time
	held     map[string]time.Duration // from joining to its call's end
	handled  map[int]int              // by Seq
	formed   []time.Duration          // per call: its first message's wait in it
	full     []time.Duration          // the same, calls of MaxItems
	receive  atomic.Int64             // the slowest receive, in ns
	maxItems int
	hold     time.Duration
}

func newBatchWatch(maxItems int, hold time.Duration) *batchWatch {
	return &batchWatch{joined: map[string]time.Time{}, held: map[string]time.Duration{}, handled: map[int]int{}, maxItems: maxItems, hold: hold}
}

func (w *batchWatch) HandleCall(ctx context.Context, c *azdispatch.Call) error {
	w.mu.Lock()
	if _, ok := w.joined[c.ID]; !ok {
		w.joined[c.ID] = time.Now()
	}
	w.mu.Unlock()
	return c.Next(ctx)
}

func (w *batchWatch) HandleStorage(ctx context.Context, op *azdispatch.StorageOp) error {
	if op.Kind != azdispatch.OpReceive {
		return op.Next(ctx)
	}
	start := time.Now()
	err := op.Next(ctx)
	took := int64(time.Since(start))
	for {
		old := w.receive.Load()
		if took <= old || w.receive.CompareAndSwap(old, took) {
			return err
		}
	}
}

func (w *batchWatch) handle(_ context.Context, msgs []*azdispatch.Message[payload]) error {
	start := time.Now()
	w.mu.Lock()
	first := start
	for _, m := range msgs {
		if at, ok := w.joined[m.ID]; ok && at.Before(first) {
			first = at
		}
		w.handled[m.Body.Seq]++
	}
	w.formed = append(w.formed, start.Sub(first))
	if len(msgs) == w.maxItems {
		w.full = append(w.full, start.Sub(first))
	}
	w.mu.Unlock()
	time.Sleep(w.hold)
	end := time.Now()
	w.mu.Lock()
	for _, m := range msgs {
		w.held[m.ID] = end.Sub(w.joined[m.ID])
	}
	w.mu.Unlock()
	return nil
}

// runBatchHandler runs the three variants on one emulator.
func runBatchHandler(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	c := o.batchHandler.withDefaults()
	var recs []record
	var lines []string
	add := func(r batchHandlerRecord, line string) {
		recs = append(recs, record{Own: r})
		lines = append(lines, fmt.Sprintf("%s: %s (ok %v)", r.Variant, line, r.OK))
	}

	fmt.Fprintf(progress, "batch-handler: per-receive, %d messages, against one message at a time\n", c.Messages)
	r, err := batchPerReceive(ctx, o, c)
	if err != nil {
		return nil, nil, fmt.Errorf("per-receive: %w", err)
	}
	add(r, fmt.Sprintf("%d calls of %.1f messages for %d receives with messages; %.4f requests per message, %.4f one at a time",
		r.Calls, r.MeanCall, r.FullReceives, r.TxPerMsg, r.SingleTxPerMsg))

	for _, trickle := range []bool{false, true} {
		name := "window-load"
		if trickle {
			name = "window-trickle"
		}
		fmt.Fprintf(progress, "batch-handler: %s, MaxItems %d, MaxWait %v, visibility %v\n", name, batchWindowItems, batchWindowWait, batchVisibility)
		r, err := batchWindow(ctx, o, c, name, trickle)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		add(r, fmt.Sprintf("%d calls of %.1f messages (%d full); first message waited at most %.0f ms (full calls %.0f ms; bound %.0f ms); %d renewals (bound %d); %.3f requests per message",
			r.Calls, r.MeanCall, r.FullCalls, r.FormedMaxMS, r.FullFormedMaxMS, r.FormBoundMS, r.Renewals, r.RenewalBound, r.TxPerMsg))
	}
	return recs, lines, nil
}

// batchFill sends n payloads to a queue named for prefix, made for the
// purpose on an emulator of its own (see openAccount), and returns a client
// of the listener's own on it, and what closes the emulator.
func batchFill(ctx context.Context, o options, prefix string, n int) (*azdispatch.Queue, func(), error) {
	acct, err := openAccount(ctx, o.real)
	if err != nil {
		return nil, nil, err
	}
	q, err := batchFillOn(ctx, acct.connectionString, o, prefix, n)
	if err != nil {
		acct.close()
		return nil, nil, err
	}
	return q, acct.close, nil
}

func batchFillOn(ctx context.Context, cs string, o options, prefix string, n int) (*azdispatch.Queue, error) {
	name := queueName(prefix)
	q, err := openQueue(cs, name, o.latency)
	if err != nil {
		return nil, err
	}
	if err := q.Create(ctx); err != nil {
		return nil, err
	}
	if err := batchSend(ctx, q, 0, n); err != nil {
		return nil, err
	}
	return openQueue(cs, name, o.latency)
}

// batchSend sends payloads from..to-1 to q, 16 at a time.
func batchSend(ctx context.Context, q *azdispatch.Queue, from, to int) error {
	pub, err := azdispatch.NewPublisher[payload](q, nil)
	if err != nil {
		return err
	}
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
				if _, err := pub.Send(ctx, payload{Seq: i, Pad: padding[:100]}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drainWith runs l until every one of n messages was handled (the watch
// says), or a deadline a minute past what it should take.
func drainWith(ctx context.Context, l *azdispatch.Listener[payload], done func() bool, limit time.Duration) error {
	runCtx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- l.Run(runCtx) }()
	deadline := time.Now().Add(limit)
	for !done() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if os.Getenv("BATCH_DEBUG") != "" {
			s := l.State()
			fmt.Fprintf(os.Stderr, "%v in flight %d received %d succeeded %d calls %d renewed %d lost %d tx %+v\n", time.Now().Format("15:04:05.000"), s.InFlight, s.Received, s.Succeeded, s.Calls, s.Renewed, s.Lost, s.Transactions)
		}
	}
	// Settled: nothing left in hand.
	for l.State().InFlight > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return <-errc
}

// batchPerReceive drains a queue with a batch listener and another with a
// listener for one message at a time, both with one dequeuer.
func batchPerReceive(ctx context.Context, o options, c batchHandlerConfig) (batchHandlerRecord, error) {
	r := batchHandlerRecord{Scenario: "batch-handler", Variant: "per-receive", Messages: c.Messages, MaxItems: azdispatch.MaxBatch}
	opts := func() *azdispatch.ListenerOptions {
		return &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1}}
	}
	perMessage := func(tx azdispatch.Transactions) float64 {
		return float64(tx.Total()-tx.EmptyReceive) / float64(c.Messages)
	}

	q, closeSingle, err := batchFill(ctx, o, "batch-single", c.Messages)
	if err != nil {
		return r, err
	}
	defer closeSingle()
	var singles atomic.Int64
	single, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[payload]) error {
		singles.Add(1)
		return nil
	}, opts())
	if err != nil {
		return r, err
	}
	if err := drainWith(ctx, single, func() bool { return single.State().Succeeded >= int64(c.Messages) }, time.Duration(c.Messages)*10*time.Millisecond+time.Minute); err != nil {
		return r, err
	}
	r.SingleTxPerMsg = perMessage(single.State().Transactions)

	q, closeBatch, err := batchFill(ctx, o, "batch-calls", c.Messages)
	if err != nil {
		return r, err
	}
	defer closeBatch()
	w := newBatchWatch(azdispatch.MaxBatch, 0)
	bo := opts()
	bo.Middleware = []azdispatch.Middleware{w}
	l, err := azdispatch.NewBatchListener(q, w.handle, bo)
	if err != nil {
		return r, err
	}
	if err := drainWith(ctx, l, func() bool { return l.State().Succeeded >= int64(c.Messages) }, time.Duration(c.Messages)*10*time.Millisecond+time.Minute); err != nil {
		return r, err
	}
	s := l.State()
	w.fill(&r, s, c.Messages, c.Margin)
	r.TxPerMsg = perMessage(s.Transactions)
	r.FullReceives = s.Transactions.Receive - s.Transactions.EmptyReceive
	r.OK = r.Lost == 0 && r.Repeated == 0 && s.Calls == r.FullReceives && r.TxPerMsg <= r.SingleTxPerMsg+2.0/float64(c.Messages) &&
		s.CallMessages <= int64(azdispatch.MaxBatch)*s.Calls
	return r, nil
}

// batchWindow runs the window variants: over a full queue, or while a
// trickle comes in.
func batchWindow(ctx context.Context, o options, c batchHandlerConfig, name string, trickle bool) (batchHandlerRecord, error) {
	r := batchHandlerRecord{Scenario: "batch-handler", Variant: name, MaxItems: batchWindowItems, MaxWaitMS: ms(batchWindowWait)}
	n := c.Messages
	if trickle {
		n = c.Rate * int(c.Trickle/time.Second)
	}
	r.Messages = n
	prefill := n
	if trickle {
		prefill = 0
	}
	q, closeEmulator, err := batchFill(ctx, o, "batch-"+name, prefill)
	if err != nil {
		return r, err
	}
	defer closeEmulator()
	w := newBatchWatch(batchWindowItems, c.Hold)
	l, err := azdispatch.NewBatchListener(q, w.handle, &azdispatch.ListenerOptions{
		VisibilityTimeout: batchVisibility,
		Middleware:        []azdispatch.Middleware{w},
		Batch:             azdispatch.BatchOptions{MaxItems: batchWindowItems, MaxWait: batchWindowWait},
		// One call at a time per dequeuer, and two dequeuers: up to 200
		// messages in hand, each renewed every second while it waits; a
		// trickle keeps a dequeuer looking every 100 ms at most, as a
		// listener that expects work would.
		Concurrency: 1,
		Scaling:     azdispatch.ScalingOptions{MaxDequeuers: 2, Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond)},
	})
	if err != nil {
		return r, err
	}
	var sending sync.WaitGroup
	var sendErr error
	if trickle {
		sending.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(c.Rate))
			defer tick.Stop()
			for i := range n {
				select {
				case <-tick.C:
				case <-ctx.Done():
					sendErr = ctx.Err()
					return
				}
				if err := batchSend(ctx, q, i, i+1); err != nil {
					sendErr = err
					return
				}
			}
		})
	}
	err = drainWith(ctx, l, func() bool { return l.State().Succeeded >= int64(n) }, c.Trickle+time.Duration(n)*10*time.Millisecond+time.Minute)
	sending.Wait()
	if err == nil {
		err = sendErr
	}
	if err != nil {
		return r, err
	}
	s := l.State()
	w.fill(&r, s, n, c.Margin)
	r.TxPerMsg = float64(s.Transactions.Total()-s.Transactions.EmptyReceive) / float64(n)
	r.ReceiveMaxMS = ms(time.Duration(w.receive.Load()))
	bound := batchWindowWait + time.Duration(w.receive.Load())
	r.FormBoundMS = ms(bound)
	// A call's first message waits MaxWait, then for the timer's goroutine
	// and a call's place: the margin.
	margin := c.Margin
	r.OK = r.Lost == 0 && r.Repeated == 0 && r.Renewals <= r.RenewalBound &&
		time.Duration(r.FormedMaxMS*float64(time.Millisecond)) <= bound+margin &&
		time.Duration(r.FullFormedMaxMS*float64(time.Millisecond)) <= bound+margin
	if !trickle {
		// Under load, calls fill: all but the last few.
		r.OK = r.OK && r.FullCalls >= n/batchWindowItems-2
	}
	return r, nil
}

// fill sets r's figures from what w saw and l's state s, for n messages
// sent, each held up to margin longer than seen.
func (w *batchWatch) fill(r *batchHandlerRecord, s azdispatch.State, n int, margin time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r.Calls = s.Calls
	if s.Calls > 0 {
		r.MeanCall = float64(s.CallMessages) / float64(s.Calls)
	}
	for i := range n {
		switch k := w.handled[i]; {
		case k == 0:
			r.Lost++
		case k > 1:
			r.Repeated += k - 1
		}
	}
	r.FullCalls = len(w.full)
	for _, d := range w.formed {
		r.FormedMaxMS = max(r.FormedMaxMS, ms(d))
	}
	for _, d := range w.full {
		r.FullFormedMaxMS = max(r.FullFormedMaxMS, ms(d))
	}
	r.Renewals = s.Renewed
	half := batchVisibility / 2
	for _, h := range w.held {
		// Held from its receive, a moment before it joined: a receive's
		// time more at most, and the margin for the way to its call and
		// to its delete after.
		r.RenewalBound += int64((h + time.Duration(w.receive.Load()) + margin) / half)
	}
}
