package azdispatch_test

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/internal/cputime"
	"github.com/azdispatch/azdispatch/memqueue"
)

var (
	engineSeed     = flag.Uint64("engine.seed", 0, "TestEngineRandomized: the seed to replay (0: a new one)")
	engineDuration = flag.Duration("engine.duration", 0, "TestEngineRandomized: how long to run rounds for (0: 3 s with -short, 12 s with AZDISPATCH_LONG=1, 4 s otherwise)")
	engineReplay   = flag.Int("engine.round", -1, "TestEngineRandomized: run only this round of the seed's (-1: rounds from 0 for the duration)")
)

// TestEngineRandomized drives real listeners over memqueue, one queue, a
// sharded set of them or a queue set over them (in a random order, some
// queues capped), through random rounds: random options (dequeuers,
// concurrency, batch size, PushOnly, visibility timeouts in fractions of a
// second, timeouts, retry delays), handlers that succeed, fail, panic, give
// up, hang to their timeout or run past half their visibility timeout,
// storage faults (failed and lost receives, deletes and updates, slow
// deletes that fail, some outlasting half the visibility timeout, slow
// receives, receives that bring messages and an error, failed and lost
// reads, writes and deletes of the payload store), wake-ups, a clock moved
// by hand in some rounds, and shutdowns at random moments. Rounds also
// send, each feature in about half of them, through a Publisher over the
// queue's payload store (listener_random_features_test.go): batches, whose
// items are handled one by one and an item that keeps failing poisoned
// alone; bodies over MaxMessageSize, offloaded as claim checks; with the
// manual clock, messages due past the listener's 7-day hop, hidden again
// as the clock moves days ahead, and a Scheduler's schedule; Cancel from
// goroutines of their own at random moments, racing delivery; unique
// sends of one key from several goroutines at once; and groups of 1 to 70
// children, each leaving a result, whose continuation the same listener
// handles (listener_random_groups_test.go). Half the rounds send
// most messages with one of a few keys to a listener with a per-key limit
// (in the process, or across instances by leases on the payload store,
// whose faults then fail and lose lease requests too), with handlers that
// sometimes Snooze; a quarter have a fleet limit (listener_random_keys_test.go).
//
// At every handler call and after every step it checks that the listener
// holds no more messages and runs no more handlers than MaxDequeuers ×
// Concurrency, and that no queue of a queue set has more in hand than its
// cap; that no delivery received after the listener began to
// delete a message whose handler succeeded runs the handler again (in
// rounds whose clock moved, a message the move made visible again while in
// hand is excused); that no more messages of a key are in a handler than
// the per-key limit, nor more handler calls than the fleet limit; that no
// handler runs for a message before it is due,
// nor after Cancel returned nil for it (nor had run when Cancel returned
// nil); that the handler runs for one message at most of each occurrence
// of the schedule (that message's own retries aside), nor for more than one
// message of a group's continuation, nor before every child of its group
// ended (its handler returned once, or it was poisoned), with an outcome
// counting every child and results that are the children's own; and that
// of the sends of one unique key at once one at
// most succeeds, the others failing with ErrDuplicate (or a storage error
// of their own, which excuses a key no send won). At the end of each
// round, with no further send, cancel, fault or wake-up, every message
// must be settled for good within a minute: every number sent, alone or
// as a batch item, handled or poisoned, unless a Cancel returned nil for
// it or could not tell (a cancel that failed midway and was tried again,
// ErrCancelUndetermined); every occurrence the schedule's record counts as
// sent handled or poisoned, the last one included; every group's
// continuation handled or poisoned; and the payload store
// holding, besides records, no payload but those kept for poison, beyond
// one for each fault that may leave one for a sweep (a failed blob write
// or delete, a message delete whose answer was lost, a send tried again).
// Run must return, State's counts must add up and agree with the queues',
// and no goroutine may be left. Some rounds also measure the CPU the
// process uses while every handler waits: a wait must block, not spin.
//
// A failure names its seed and round. Replay the round, or run for longer:
//
//	go test -run TestEngineRandomized -engine.seed=N -engine.round=R -v .
//	go test -run TestEngineRandomized -engine.duration=10m .
func TestEngineRandomized(t *testing.T) {
	// Not parallel: the CPU measurement must see this test's work alone.
	seed := *engineSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	budget := *engineDuration
	if budget == 0 {
		switch {
		case testing.Short():
			budget = 3 * time.Second
		case azurite.Long():
			budget = 12 * time.Second
		default:
			budget = 4 * time.Second
		}
	}
	t.Logf("seed %d: replay with -engine.seed=%d", seed, seed)
	end := time.Now().Add(budget)
	for round := max(*engineReplay, 0); round == max(*engineReplay, 0) || *engineReplay < 0 && time.Now().Before(end); round++ {
		e := newEngineRound(seed, round)
		if !t.Run(fmt.Sprintf("round-%d", round), e.run) {
			t.Fatalf("round %d failed (%s): replay it with -engine.seed=%d -engine.round=%d", round, e.describe(), seed, round)
		}
	}
}

// engineRound is one listener's life under random steps.
type engineRound struct {
	seed     uint64
	round    int
	r        *rand.Rand            // the driver's; handlers draw from behaviourOf
	queues   []*memqueue.Queue     // one, or the shards of src
	src      azdispatch.Source     // the queue, a sharded queue or a queue set over queues
	target   azdispatch.Target     // where the round sends: src, or a sharded queue over a set's queues
	set      *azdispatch.QueueSet  // src, if it is a queue set
	clock    *memqueue.ManualClock // nil: the real clock
	l        *azdispatch.Listener[string]
	pub      *azdispatch.Publisher[string]
	opts     azdispatch.ListenerOptions
	capacity int // handler calls at once: MaxDequeuers × Concurrency
	held     int // messages in hand at once: capacity, twice it with a key limit
	// waitCheck rounds measure the CPU of a listener whose every handler
	// waits, with a HandlerTimeout long enough not to end the wait.
	waitCheck bool
	// batchCalls rounds run a batch handler (opts.Batch): handleBatch.
	batchCalls bool
	// receiveFaults counts the steps that armed failed receives, or
	// receives that bring messages and fail.
	receiveFaults int

	slowDeletes  atomic.Bool  // deletes sleep, then fail with 503
	longDeletes  bool         // some slow deletes outlast half the visibility timeout
	slowReceives bool         // receives take a few milliseconds
	receiveFails atomic.Int64 // receives that bring messages then fail, to come
	epoch        atomic.Int64 // clock moves so far
	tick         atomic.Int64 // orders receives and deletes
	gate         atomic.Pointer[chan struct{}]

	// What the round's publisher does besides plain sends (see
	// listener_random_features_test.go), and what it has sent.
	features
	bg sync.WaitGroup // the round's own goroutines: cancels racing delivery

	mu         sync.Mutex
	sent       int
	running    int
	mostRun    int
	mostHeld   int             // messages in hand, the most seen at a handler call
	receivedAt map[string]seen // by delivery: when its receive started
	succeeded  map[int]seen    // by message: when the receive of its first successful delivery started
	deleting   map[int]int64   // by message: the tick its first delete after a success started
	poisoned   map[int]bool
	batchSizes []int // a batch round's calls, by their messages
	violation  string
}

// seen is when a receive started: the tick, and the clock's moves so far.
type seen struct{ tick, epoch int64 }

func newEngineRound(seed uint64, round int) *engineRound {
	rs := seed ^ uint64(round+1)*0x9e3779b97f4a7c15
	r := rand.New(rand.NewPCG(rs, uint64(round)))
	e := &engineRound{seed: rs, round: round, r: r,
		receivedAt: map[string]seen{}, succeeded: map[int]seen{}, deleting: map[int]int64{}, poisoned: map[int]bool{}}
	e.features = newFeatures()
	var opts memqueue.Options
	if r.IntN(3) == 0 {
		e.clock = memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		opts.Clock = e.clock
	}
	opts.Intercept = e.intercept
	e.longDeletes = r.IntN(2) == 0
	e.slowReceives = r.IntN(3) == 0
	name := fmt.Sprintf("engine-%d-%d", seed%100000, round)
	switch r.IntN(3) {
	case 0:
		shards := make([]azdispatch.Shard, 2+r.IntN(3))
		for i := range shards {
			q := memqueue.New(fmt.Sprintf("%s-%d", name, i), &opts)
			e.queues = append(e.queues, q)
			shards[i] = q
		}
		sq, err := azdispatch.NewShardedQueue(name, shards, &azdispatch.ShardedQueueOptions{
			// From none to past the round: a receive for messages known
			// to be due must look past a shard found empty a moment ago.
			EmptySkip: []time.Duration{0, 100 * time.Millisecond, 5 * time.Second, time.Hour}[r.IntN(4)],
			RetryMin:  50 * time.Millisecond, RetryMax: time.Second,
		})
		if err != nil {
			panic(err)
		}
		e.src, e.target = sq, sq
	case 1:
		e.newSetSource(name, &opts)
	default:
		q := memqueue.New(name, &opts)
		e.queues = []*memqueue.Queue{q}
		e.src, e.target = q, q
	}
	o := &e.opts
	// Raw text: a body is the decimal number the round gave it, and a
	// large one that number, a space and padding.
	o.Codec = azdispatch.Raw()
	o.Scaling.MaxDequeuers = 1 + r.IntN(4)
	o.Concurrency = 1 + r.IntN(8)
	o.Scaling.BatchSize = 1 + r.IntN(azdispatch.MaxBatch)
	o.Scaling.PushOnly = r.IntN(2) == 0
	if o.Scaling.PushOnly {
		o.Scaling.Wake = e.src.(azdispatch.WakeSource)
	}
	// Fractions of a second too: the service counts whole seconds.
	o.VisibilityTimeout = time.Second + time.Duration(r.IntN(2000))*time.Millisecond
	o.HandlerTimeout = time.Duration(100+r.IntN(300)) * time.Millisecond
	if r.IntN(2) == 0 {
		// Past half the visibility timeout: handlers that run long are
		// renewed.
		o.HandlerTimeout = o.VisibilityTimeout + time.Duration(r.IntN(1000))*time.Millisecond
	}
	if e.waitCheck = r.IntN(3) == 0; e.waitCheck {
		o.HandlerTimeout = 30 * time.Second
	}
	o.MaxDequeueCount = int64(3 + r.IntN(4))
	retry := time.Duration(r.IntN(2)) * time.Second // the service's unit
	o.Retry = func(int64) time.Duration { return retry }
	o.Scaling.Idle = azdispatch.ExponentialIdle(0, time.Duration(20+r.IntN(280))*time.Millisecond)
	o.Scaling.ScaleInterval = time.Duration(1+r.IntN(100)) * time.Millisecond
	o.DrainTimeout = time.Duration(100+r.IntN(900)) * time.Millisecond
	o.Middleware = []azdispatch.Middleware{e}
	// A group's continuation goes where the round sends (a queue set's
	// sends go through a sharded queue of another name).
	o.Payloads.Continue = func(name string) (azdispatch.Target, error) {
		if name != e.target.Name() {
			return nil, fmt.Errorf("no queue %q", name)
		}
		return e.target, nil
	}
	e.capacity = o.Scaling.MaxDequeuers * o.Concurrency
	if e.batchCalls = r.IntN(3) == 0; e.batchCalls {
		o.Batch = azdispatch.BatchOptions{MaxItems: 1 + r.IntN(40), ByKey: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			o.Batch.MaxWait = time.Duration(1+r.IntN(200)) * time.Millisecond
		}
		// Each message of a call is in a handler call of its own.
		e.capacity *= o.Batch.MaxItems
	}
	e.chooseFeatures(r)
	// A key limit or classes double what a dequeuer holds, not what it
	// runs.
	e.held = e.capacity
	if e.opts.Limits.PerKey > 0 || e.opts.Limits.InOrder || len(e.opts.Limits.Classes) > 0 {
		e.held *= 2
	}
	return e
}

// newSetSource makes the round's source a queue set over 2 to 4 queues,
// in a random order, some capped; the round sends through a sharded queue
// over the same queues, so that every one of them has messages.
func (e *engineRound) newSetSource(name string, opts *memqueue.Options) {
	r := e.r
	order := []azdispatch.SetOrder{azdispatch.FairShares, azdispatch.WeightedShares, azdispatch.StrictPriority}[r.IntN(3)]
	members := make([]azdispatch.SetMember, 2+r.IntN(3))
	shards := make([]azdispatch.Shard, len(members))
	for i := range members {
		q := memqueue.New(fmt.Sprintf("%s-%d", name, i), opts)
		e.queues = append(e.queues, q)
		shards[i] = q
		members[i] = azdispatch.SetMember{Queue: q, Cap: []int{0, 0, 1, 3}[r.IntN(4)]}
		if order == azdispatch.WeightedShares {
			members[i].Weight = 1 + r.IntN(4)
		}
	}
	o := &azdispatch.QueueSetOptions{Order: order, Aging: time.Duration(r.IntN(500)) * time.Millisecond}
	o.EmptySkip = []time.Duration{0, 100 * time.Millisecond, 5 * time.Second, time.Hour}[r.IntN(4)]
	o.RetryMin, o.RetryMax = 50*time.Millisecond, time.Second
	set, err := azdispatch.NewQueueSet(name, members, o)
	if err != nil {
		panic(err)
	}
	sq, err := azdispatch.NewShardedQueue(name+"-sends", shards, &o.ShardedQueueOptions)
	if err != nil {
		panic(err)
	}
	e.set, e.src, e.target = set, set, sq
}

// checkSetCaps notes a violation if a queue of the round's set has more in
// hand than its cap. Hold e.mu.
func (e *engineRound) checkSetCaps() {
	if e.set == nil || e.violation != "" {
		return
	}
	for _, st := range e.set.State() {
		if st.Cap > 0 && st.InHand > st.Cap {
			e.violation = fmt.Sprintf("queue %s of the set: %d in hand, past its cap of %d", st.Queue, st.InHand, st.Cap)
		}
	}
}

func (e *engineRound) describe() string {
	o := e.opts
	if e.set != nil {
		return fmt.Sprintf("queue set over %d queues, ", len(e.queues)) + e.describeListener(o)
	}
	return e.describeListener(o)
}

func (e *engineRound) describeListener(o azdispatch.ListenerOptions) string {
	return fmt.Sprintf("round seed %d, %d shard(s), manual clock %t, PushOnly %t, MaxDequeuers %d, Concurrency %d, BatchSize %d, visibility %v, HandlerTimeout %v, MaxDequeueCount %d, long deletes %t, slow receives %t, batch handler %t %+v, %s",
		e.seed, len(e.queues), e.clock != nil, o.Scaling.PushOnly, o.Scaling.MaxDequeuers, o.Concurrency, o.Scaling.BatchSize, o.VisibilityTimeout, o.HandlerTimeout, o.MaxDequeueCount, e.longDeletes, e.slowReceives, e.batchCalls, o.Batch, e.features.describe())
}

// run drives the round: steps with checks, then the drain and the checks
// of the end.
func (e *engineRound) run(t *testing.T) {
	t.Logf("%s", e.describe())
	ignore := goleak.IgnoreCurrent()
	var l *azdispatch.Listener[string]
	var err error
	if e.batchCalls {
		l, err = azdispatch.NewBatchListener(e.src, e.handleBatch, &e.opts)
	} else {
		l, err = azdispatch.NewListener(e.src, e.handle, &e.opts)
	}
	require.NoError(t, err)
	e.l = l
	e.pub, err = azdispatch.NewPublisher[string](e.target, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), TTL: e.ttl})
	require.NoError(t, err)
	run := startRun(l)
	stopScheduler := e.startScheduler(t)
	defer func() {
		// A check that fails ends the round at once: its listener and
		// scheduler must not run on into the tests after it.
		if t.Failed() {
			_ = stopScheduler()
			_ = run.stop()
		}
	}()
	if e.waitCheck {
		e.waitCostsNoCPU(t, l)
	}
	start := time.Now()
	for steps := 20 + e.r.IntN(40); steps > 0; steps-- {
		if e.step(t, l, &run) {
			continue
		}
		e.check(t, l)
	}
	// Cancels finish, and the scheduler stops, before the drain: from
	// here on nothing is sent.
	e.waitCancels(t)
	require.NoError(t, stopScheduler(), "the scheduler's Run")
	drained := time.Now()
	e.drain(t, l)
	e.mu.Lock() // a handler may still run: a message delivered again after the drain
	summary := e.features.summary()
	e.mu.Unlock()
	t.Logf("%s", summary)
	if e.batchCalls {
		e.mu.Lock()
		t.Logf("%d batch calls; the largest %d", len(e.batchSizes), slices.Max(append(e.batchSizes, 0)))
		e.mu.Unlock()
	}
	t.Logf("%d messages; steps took %v, the drain %v; at most %d in hand and %d handler calls at once, of %d",
		e.sent, drained.Sub(start).Round(time.Millisecond), time.Since(drained).Round(time.Millisecond), e.mostHeld, e.mostRun, e.capacity)
	require.NoError(t, run.stop(), "Run's result")
	e.checkEnd(t, l)
	require.NoError(t, goleak.Find(ignore), "goroutines left by the round")
}

// step takes one random step; it reports whether it restarted Run (whose
// State is then checked by the next step).
func (e *engineRound) step(t *testing.T, l *azdispatch.Listener[string], run **runningListener) bool {
	switch k := e.r.IntN(100); {
	case k < 35:
		// Often one at a time: a dequeuer then takes it with slots to
		// spare, finds nothing more and, idle, may retire while it is in
		// hand.
		n := 1
		if e.r.IntN(2) == 0 {
			n += e.r.IntN(20)
		}
		e.sendSome(t, n)
	case k < 45:
		if op := e.faultOp(); op != "" {
			e.queue().FailNext(op, 1+e.r.IntN(2), nil)
		}
	case k < 50:
		if op := e.faultOp(); op != "" {
			e.queue().LoseNext(op, 1)
			if op == azdispatch.OpDelete {
				// A delete that acted, its answer lost: the listener
				// cannot tell that the message is gone, and leaves its
				// payload blob, if any, for a sweep.
				e.mu.Lock()
				e.leavers++
				e.mu.Unlock()
			}
		}
	case k < 55:
		e.slowDeletes.Store(!e.slowDeletes.Load())
	case k < 60:
		if e.receiveFaults < 2 { // backed off from as failed receives are
			e.receiveFaults++
			e.receiveFails.Add(1 + int64(e.r.IntN(2)))
		}
	case k < 68:
		if e.clock != nil {
			e.epoch.Add(1)
			e.clock.Advance(e.clockStep())
		}
	case k < 75:
		l.Notify()
	case k < 80:
		require.NoError(t, (*run).stop(), "Run's result at a restart")
		*run = startRun(l)
		return true
	case k < 84:
		e.blobFault()
	case k < 88:
		e.cancelSome()
	case k < 91:
		e.sendUnique(t)
	case k < 98:
		e.controlSchedule()
	default:
		time.Sleep(time.Duration(e.r.IntN(250)) * time.Millisecond)
	}
	return false
}

// queue picks the queue a fault is armed on: one of the shards.
func (e *engineRound) queue() *memqueue.Queue { return e.queues[e.r.IntN(len(e.queues))] }

// faultOp picks the call a fault is armed for. Failed receives are backed
// off from exponentially (up to 30 s after eight in a row), so a round arms
// few of them: the drain's bound is for the listener, not its back-off.
func (e *engineRound) faultOp() azdispatch.Op {
	ops := []azdispatch.Op{azdispatch.OpReceive, azdispatch.OpDelete, azdispatch.OpUpdate}
	op := ops[e.r.IntN(len(ops))]
	if op == azdispatch.OpReceive {
		if e.receiveFaults >= 2 {
			return ""
		}
		e.receiveFaults++
	}
	return op
}

// send puts n new messages on the queue as plain text; a few, when the
// clock is real and the listener polls, with a delay.
func (e *engineRound) send(t *testing.T, n int) {
	for range n {
		id := e.newID()
		opts := &azdispatch.SendOptions{TTL: e.ttl}
		// A delayed send wakes no one when it comes due: a push-only
		// listener learns of it only from the next wake-up.
		if !e.opts.Scaling.PushOnly && e.r.IntN(10) == 0 {
			opts.Delay = time.Duration(1+e.r.IntN(2)) * time.Second
		}
		// A sharded queue whose every shard the faults have backed off
		// refuses sends for a moment, as it should: send again.
		deadline := time.Now().Add(10 * time.Second)
		for {
			msgID, err := e.target.Send(context.Background(), strconv.Itoa(id), opts)
			if err == nil || !errors.Is(err, azdispatch.ErrNoHealthyShard) || time.Now().After(deadline) {
				require.NoError(t, err)
				e.sentAs(msgID, false, id)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// check asserts what must hold at every moment; handle checks the
// capacity at every handler call too.
func (e *engineRound) check(t *testing.T, l *azdispatch.Listener[string]) {
	t.Helper()
	s := l.State()
	require.LessOrEqual(t, s.InFlight, e.held, "messages in hand past MaxDequeuers × Concurrency (twice that with a key limit): %+v", s)
	e.mu.Lock()
	defer e.mu.Unlock()
	require.Empty(t, e.violation)
	require.LessOrEqual(t, e.mostRun, e.capacity, "handler calls at once past MaxDequeuers × Concurrency")
}

// drain ends the round: no fault, send or wake-up from here on (on a
// manual clock, only moves of it), and every message must be settled for
// good within a minute.
func (e *engineRound) drain(t *testing.T, l *azdispatch.Listener[string]) {
	e.slowDeletes.Store(false)
	e.receiveFails.Store(0)
	// A minute without progress fails the round; a slow one that keeps
	// settling messages (a backlog of a schedule's occurrences, say, under
	// a fleet limit of one or two calls, some of them hanging to their
	// HandlerTimeout) goes on.
	deadline, least := time.Now().Add(time.Minute), math.MaxInt
	for {
		e.check(t, l)
		missing, depth := e.unsettled(t)
		if len(missing) == 0 && depth == 0 {
			return
		}
		if left := len(missing) + depth; left < least {
			deadline, least = time.Now().Add(time.Minute), left
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled, and no progress for a minute of the drain: queue depth %d, %d messages neither handled nor poisoned: %v\nstate: %+v",
				depth, len(missing), head(missing, 20), l.State())
		}
		if e.clock != nil {
			e.epoch.Add(1)
			// Messages sent past the listener's hop are due days ahead.
			e.clock.Advance(e.drainStep())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unsettled lists the messages sent that were neither handled nor
// poisoned, and the queue's depth: a settled round has neither.
func (e *engineRound) unsettled(t *testing.T) (missing []int, depth int) {
	ctx := context.Background()
	for _, q := range e.queues {
		n, err := q.Depth(ctx)
		require.NoError(t, err)
		depth += n
		e.readPoison(t, q.PoisonQueue())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for n := range e.sent {
		if _, ok := e.succeeded[n]; !ok && !e.poisoned[n] && e.owed(n) {
			missing = append(missing, n)
		}
	}
	for range e.groupsUnsettled() {
		missing = append(missing, -1) // a group's continuation
	}
	return missing, depth
}

// readPoison takes the envelopes off a poison queue and records their
// messages as poisoned.
func (e *engineRound) readPoison(t *testing.T, pq azdispatch.Source) {
	ctx := context.Background()
	for {
		batch, err := pq.Receive(ctx, azdispatch.MaxBatch, time.Minute)
		require.NoError(t, err)
		if len(batch) == 0 {
			break
		}
		for _, d := range batch {
			env, err := azdispatch.ParsePoison(d.Text)
			require.NoError(t, err)
			require.NoError(t, pq.Delete(ctx, d))
			e.mu.Lock()
			err = e.poisonedAs(env)
			e.mu.Unlock()
			require.NoError(t, err)
		}
	}
}

// checkEnd asserts what must hold once Run has returned.
func (e *engineRound) checkEnd(t *testing.T, l *azdispatch.Listener[string]) {
	s := l.State()
	// Hops, cancelled messages and a schedule's duplicates are received,
	// and settled as none of the five.
	require.Equal(t, s.Received, s.Succeeded+s.Retried+s.Poisoned+s.Lost+s.Released+s.Rehidden+s.Snoozed+s.Cancelled+s.Duplicates,
		"received = succeeded + retried + poisoned + lost + released + rehidden + snoozed + cancelled + duplicates: %+v", s)
	require.Zero(t, s.InFlight)
	require.Zero(t, s.ActiveDequeuers)
	if e.set != nil {
		for _, st := range e.set.State() {
			require.Zero(t, st.InHand, "queue %s of the set: in hand after Run returned, so let go of on no path", st.Queue)
		}
	}
	var qt azdispatch.Transactions
	for _, q := range e.queues {
		t := q.Transactions()
		qt.Receive += t.Receive
		qt.Delete += t.Delete
		qt.Update += t.Update
	}
	require.Equal(t, qt.Receive, s.Transactions.Receive, "the listener's receives, as the queues counted them")
	if e.cancels == 0 {
		require.Equal(t, qt.Delete, s.Transactions.Delete, "the listener's deletes, as the queues counted them")
	} else {
		// A cancel deletes too.
		require.GreaterOrEqual(t, qt.Delete, s.Transactions.Delete, "the listener's deletes, as the queues counted them")
	}
	require.Equal(t, qt.Update, s.Transactions.Update, "the listener's updates, as the queues counted them")
	e.checkFeaturesEnd(t, s)
	e.mu.Lock()
	defer e.mu.Unlock()
	// A batch is one message of several items; a schedule's messages are
	// not numbered.
	require.LessOrEqual(t, s.Succeeded+s.Poisoned, int64(e.sent+len(e.schedMessages)+len(e.contMsgs)), "%+v", s)
	require.Empty(t, e.violation)
}

// waitCostsNoCPU fills the listener with handlers that wait at a gate, and
// more messages than it may hold, then measures the process's CPU while it
// waits, and opens the gate.
func (e *engineRound) waitCostsNoCPU(t *testing.T, l *azdispatch.Listener[string]) {
	g := make(chan struct{})
	e.gate.Store(&g)
	defer func() {
		e.gate.Store(nil)
		close(g)
	}()
	e.send(t, e.held+1+e.r.IntN(10))
	// The listener takes what its dequeuers may hold (as many as the
	// queue's depth calls for), then waits: until nothing changes for a
	// while.
	deadline := time.Now().Add(20 * time.Second)
	last, since := -1, time.Now()
	for time.Since(since) < 300*time.Millisecond {
		if time.Now().After(deadline) {
			t.Errorf("the listener did not settle into its wait within 20 s, so its CPU could not be measured: %+v", l.State())
			return
		}
		if n := l.State().InFlight; n != last || n == 0 {
			last, since = n, time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	const window = 500 * time.Millisecond
	before, err := cputime.Self()
	require.NoError(t, err)
	time.Sleep(window)
	after, err := cputime.Self()
	require.NoError(t, err)
	share := float64(after-before) / float64(window)
	t.Logf("CPU while %d handlers wait: %.1f%% of a core", last, 100*share)
	// A spinning wait costs a whole core; waiting costs next to nothing.
	require.Less(t, share, 0.25, "a waiting listener must not spin")
}

// handle is the round's handler: what it does is drawn from the message
// and its delivery, so that a seed replays it.
func (e *engineRound) handle(ctx context.Context, m *azdispatch.Message[string]) error {
	if m.Occurrence != nil {
		return e.handleOccurrence(ctx, m)
	}
	if id, ok := continuationOf(m.Body); ok {
		return e.handleContinuation(ctx, m, id)
	}
	n, err := bodyID(m.Body)
	if err != nil {
		e.mu.Lock()
		e.violationf("a handler got a body the round never sent: %q (%s): %v", m.Body[:min(len(m.Body), 40)], m.ID, err)
		e.mu.Unlock()
		return nil
	}
	key := deliveryKey(m.ID, m.DequeueCount)
	e.mu.Lock()
	e.handlerCalled(n, m)
	got := e.receivedAt[key]
	if del, ok := e.deleting[n]; ok && got.tick > del && got.epoch == e.succeeded[n].epoch && e.violation == "" {
		e.violation = fmt.Sprintf("message %d (%s): delivery %d, received after the listener began to delete it as handled, ran the handler again",
			n, m.ID, m.DequeueCount)
	}
	e.running++
	e.mostRun = max(e.mostRun, e.running)
	s := e.l.State()
	e.mostHeld = max(e.mostHeld, s.InFlight)
	if s.InFlight > e.held && e.violation == "" {
		e.violation = fmt.Sprintf("%d messages in hand at a handler call, past %d (MaxDequeuers × Concurrency, twice that with a key limit): %+v", s.InFlight, e.held, s)
	}
	e.checkSetCaps()
	e.keyEntered(m)
	e.orderStarted(m, s)
	e.checkFleet()
	snooze := e.snoozeSome(n, m.DequeueCount)
	e.mu.Unlock()
	returned, called := false, false
	defer func() { // a panic ends the call too
		e.mu.Lock()
		if called {
			e.ended[n] = true
		}
		e.running--
		e.keyLeft(m)
		if !returned {
			e.orderEnded(m, errPanicked)
		}
		e.mu.Unlock()
	}()
	if snooze != nil {
		return snooze
	}
	called = true
	if !e.batchCalls { // a batch handler's context leaves no result
		if err := azdispatch.SetGroupResult(ctx, []byte(strconv.Itoa(n))); err != nil {
			return err
		}
	}
	err = e.behave(ctx, n, m.DequeueCount)
	returned = true
	e.mu.Lock()
	e.orderEnded(m, err)
	if _, ok := e.succeeded[n]; !ok && err == nil {
		e.succeeded[n] = got
	}
	e.mu.Unlock()
	return err
}

// handleBatch is a batch round's handler: each message does what handle
// does for it, at once, and its outcome is its own (a panic too). A call
// in fifteen fails as a whole before any message is handled, by a plain
// error or a panic, drawn from its first message.
func (e *engineRound) handleBatch(ctx context.Context, msgs []*azdispatch.Message[string]) error {
	e.mu.Lock()
	e.batchSizes = append(e.batchSizes, len(msgs))
	if b := e.opts.Batch; len(msgs) > b.MaxItems {
		e.violationf("a call of %d messages, past MaxItems %d", len(msgs), b.MaxItems)
	}
	for _, m := range msgs {
		if e.opts.Batch.ByKey && m.Key != msgs[0].Key {
			e.violationf("a call by key with keys %q and %q", msgs[0].Key, m.Key)
		}
	}
	e.mu.Unlock()
	switch behaviourOf(e.seed^0x5bd1e995, len(msgs), msgs[0].DequeueCount) % 30 {
	case 0:
		return errors.New("the batch call failed")
	case 1:
		panic("the batch call panicked")
	}
	errs := make([]error, len(msgs))
	var calls sync.WaitGroup
	for i, m := range msgs {
		calls.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					errs[i] = fmt.Errorf("message %s panicked: %v", m.ID, v)
				}
			}()
			errs[i] = e.handle(ctx, m)
		})
	}
	calls.Wait()
	return azdispatch.PerMessage(errs)
}

// errPanicked stands for a handler call that panicked.
var errPanicked = errors.New("the handler panicked")

func deliveryKey(id string, dequeueCount int64) string {
	return id + "/" + strconv.FormatInt(dequeueCount, 10)
}

// behave does what behaviourOf says for delivery dequeueCount of message
// (or batch item, or occurrence) n.
func (e *engineRound) behave(ctx context.Context, n int, dequeueCount int64) error {
	if g := e.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h := behaviourOf(e.seed, n, dequeueCount)
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch p := h % 100; {
	case p < 48:
		return nil
	case p < 62:
		return wait(time.Duration(h>>8%100) * time.Millisecond)
	case p < 70:
		// Long enough to be in hand while its dequeuer finds the queue
		// empty, and retires.
		return wait(time.Duration(200+h>>8%600) * time.Millisecond)
	case p < 80:
		return errors.New("the handler failed")
	case p < 84:
		panic("the handler panicked")
	case p < 87:
		return azdispatch.Permanent(errors.New("the handler gave up"))
	case p < 91 && !e.waitCheck:
		<-ctx.Done() // hangs to its HandlerTimeout
		return ctx.Err()
	case p < 91:
		return errors.New("the handler failed")
	default:
		// Past half the visibility timeout: renewed while it runs.
		return wait(e.opts.VisibilityTimeout*6/10 + time.Duration(h>>8%100)*time.Millisecond)
	}
}

// behaviourOf draws a delivery's behaviour from the round's seed.
func behaviourOf(seed uint64, n int, dequeueCount int64) uint64 {
	x := seed ^ uint64(n)*0xbf58476d1ce4e5b9 ^ uint64(dequeueCount)*0x94d049bb133111eb
	x ^= x >> 31
	x *= 0x9e3779b97f4a7c15
	x ^= x >> 29
	return x
}

// HandleCall passes handler calls on: the round is a Middleware so that
// it sees the listener's storage requests.
func (e *engineRound) HandleCall(ctx context.Context, c *azdispatch.Call) error { return c.Next(ctx) }

// HandleStorage records when each receive started (for the messages it
// brings) and when the first delete of a message after its handler
// succeeded started, and makes some receives fail after bringing messages.
func (e *engineRound) HandleStorage(ctx context.Context, op *azdispatch.StorageOp) error {
	if op.Kind == azdispatch.OpDelete {
		if n, ok := e.singleOf(op.Message); ok {
			e.mu.Lock()
			if _, ok := e.succeeded[n]; ok {
				if _, ok := e.deleting[n]; !ok {
					e.deleting[n] = e.tick.Add(1)
				}
			}
			e.mu.Unlock()
		}
	}
	if op.Kind == azdispatch.OpSend {
		// A copy to the poison queue: the message has ended, for its
		// group, once it is made.
		err := op.Next(ctx)
		if n, ok := e.singleOf(op.Message); ok && err == nil {
			e.mu.Lock()
			e.ended[n] = true
			e.mu.Unlock()
		}
		return err
	}
	if op.Kind != azdispatch.OpReceive {
		return op.Next(ctx)
	}
	started := seen{tick: e.tick.Add(1), epoch: e.epoch.Load()}
	err := op.Next(ctx)
	if len(op.Received) == 0 {
		return err
	}
	e.mu.Lock()
	for _, d := range op.Received {
		e.receivedAt[deliveryKey(d.ID, d.DequeueCount)] = started
	}
	e.mu.Unlock()
	if err == nil && e.receiveFails.Add(-1) >= 0 {
		return errors.New("the receive's answer came with an error")
	}
	return err
}

// intercept makes deletes slow and failing while slowDeletes is set (in
// some rounds, some longer than half the visibility timeout, so that the
// message's first renewal comes due while its delete is under way), and
// receives slow in some rounds.
func (e *engineRound) intercept(_ context.Context, queue string, op azdispatch.Op) error {
	if strings.HasSuffix(queue, "-poison") {
		return nil
	}
	if op == azdispatch.OpReceive && e.slowReceives {
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	}
	if op != azdispatch.OpDelete || !e.slowDeletes.Load() {
		return nil
	}
	took := time.Duration(rand.IntN(300)) * time.Millisecond
	if e.longDeletes && rand.IntN(4) == 0 {
		// Past the visibility timeout too: the message is back before the
		// delete has failed.
		took = e.opts.VisibilityTimeout/2 + rand.N(e.opts.VisibilityTimeout+500*time.Millisecond)
	}
	time.Sleep(took)
	return &azdispatch.StorageError{Op: op, Queue: queue, StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy",
		Err: errors.New("throttled")}
}

// runningListener is a Run in progress.
type runningListener struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startRun(l *azdispatch.Listener[string]) *runningListener {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningListener{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx) }()
	return r
}

// stop ends the Run and returns its result; Run must return within a
// minute (its drain timeout is at most a second).
func (r *runningListener) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(time.Minute):
			r.err = errors.New("Run did not return within a minute of its context ending")
		}
	})
	return r.err
}

func head[E cmp.Ordered](ns []E, n int) []E {
	slices.Sort(ns)
	return ns[:min(n, len(ns))]
}
