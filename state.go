package azdispatch

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/backoff"
	"github.com/azdispatch/azdispatch/internal/latency"
)

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventScaleUp: the listener started dequeuers after reading the queue's depth.
	EventScaleUp EventKind = iota + 1
	// EventScaleDown: an idle dequeuer stopped.
	EventScaleDown
	// EventIdle: a dequeuer found the queue empty and is backing off.
	EventIdle
	// EventWoken: [Listener.Notify] (or a [WakeSource]) woke the listener: a dequeuer was
	// backing off, or none was running. ([State.Wakes] counts every call.)
	EventWoken
	// EventFatal: storage refused a request in a way retrying will not fix
	// (see [ErrFatal]): [Event.Err] says how. The listener keeps trying; [State.Fatal]
	// and [Listener.Ready] show it until a request of the same kind succeeds.
	EventFatal
	// EventRecovered: a request of a kind that had failed fatally succeeded;
	// [Event.Err] is the error that stood until then.
	EventRecovered
	// EventTargetUnmet: with [ScalingOptions.TargetWait], the time in
	// queue the target allows calls for more dequeuers than
	// [ScalingOptions.MaxDequeuers]; [Event.Dequeuers] is how many it
	// calls for, [Event.Depth] the depth read. It comes when a decision
	// calls for more than the maximum after one that did not (or after a
	// receive found the queue empty), not at every decision while the
	// target stays out of reach; [State.Wanted] says how far.
	EventTargetUnmet
)

func (k EventKind) String() string {
	switch k {
	case EventScaleUp:
		return "scale-up"
	case EventScaleDown:
		return "scale-down"
	case EventIdle:
		return "idle"
	case EventWoken:
		return "woken"
	case EventFatal:
		return "fatal"
	case EventRecovered:
		return "recovered"
	case EventTargetUnmet:
		return "target-unmet"
	}
	return "unknown"
}

// Event is a change in a listener's dequeuers or in its standing with
// storage, for logs and metrics. See
// [ListenerOptions.OnEvent].
type Event struct {
	Kind      EventKind
	Dequeuers int           // active dequeuers after the change; [EventTargetUnmet]: those the target calls for
	Depth     int           // [EventScaleUp], [EventTargetUnmet]: the depth that was read; -1 for a scale-up on full receives, between readings
	IdleCount int           // [EventIdle]: empty receives in a row by this dequeuer
	Delay     time.Duration // [EventIdle]: how long it backs off
	Err       error         // [EventFatal], [EventRecovered]: the fatal storage error
}

// State is a point-in-time view of a listener. Every received message,
// once settled, is counted in exactly one of Succeeded, Retried, Poisoned,
// Lost, Released, Rehidden, Snoozed, Cancelled and Duplicates; Failed,
// Panics, Renewed, KeyWaits and the error counts describe what happened on
// the way.
type State struct {
	InFlight           int // messages being handled or settled now
	ActiveDequeuers    int // receive loops running now
	MaxActiveDequeuers int // the most that ran at once
	IdleDequeuers      int // of ActiveDequeuers, those backing off after finding nothing

	// Depth is the queue's approximate depth as last read for scaling
	// (invisible messages included), at DepthAt; DepthAt is zero before the
	// first read.
	Depth   int
	DepthAt time.Time

	Received  int64 // messages received
	Succeeded int64 // handled without error and deleted
	Failed    int64 // handler errors, panics and timeouts
	Retried   int64 // released to be tried again later: after a failure, or after a failed move to the poison queue (by cause in RetriedFor)
	Poisoned  int64 // moved to the poison queue
	Panics    int64 // of Failed, the handler panics
	Lost      int64 // not settled: ownership lost (stale pop receipt) or a delete or release failed; the message reappears when its visibility timeout ends
	Released  int64 // received but not started at shutdown, or cut off by the drain timeout: made visible again at once
	Renewed   int64 // visibility renewals of long-running handlers
	// Rehidden counts delayed messages received before they were due and
	// hidden again (see [Publisher.SendAfter]): hops, not tries. They are
	// counted in Received too, and in nothing else.
	Rehidden int64
	// Cancelled counts delayed messages found cancelled when they were
	// due (see [Publisher.Cancel]), and deleted unhandled.
	Cancelled int64
	// Snoozed counts messages put back without a try: by the handler's
	// [Snooze], or because their key was at its limit (see
	// [LimitOptions]). KeyWaits counts the messages that waited in hand for
	// their key before they ran (or were snoozed after all); KeysHeldElsewhere
	// those snoozed because every place of their key was held by another
	// listener ([LimitOptions.AcrossInstances]), and LeasesLost the leases
	// of [LimitOptions] (a key's, a place of the fleet's) lost while held:
	// renewals failed until they expired.
	Snoozed, KeyWaits, KeysHeldElsewhere, LeasesLost int64
	// OrderWaits counts the messages snoozed because the message of their
	// key they follow was not done yet ([LimitOptions.InOrder]), and
	// OrderGapsSkipped the times a key stuck for OrderWait went on without
	// the message it was waiting for.
	OrderWaits, OrderGapsSkipped int64
	// Duplicates counts messages deleted unhandled because another of
	// the same once-mark was delivered: of a [Scheduler]'s occurrence (see
	// [MessageInfo.Occurrence]), or a group's continuation sent twice (see
	// [PayloadStore.StartGroup]).
	Duplicates int64

	// RetriedFor breaks Retried down by cause.
	RetriedFor RetryCounts

	// TimeInQueue is how long messages waited before their first
	// delivery, on the service's clock (see [MessageInfo.TimeInQueue]):
	// retries are not in it, since a retry waits by design. First is by
	// the service's dequeue count: a message whose first receive reached
	// no handler here (its answer lost, its process gone) is counted at no
	// delivery; its wait shows in [MessageInfo.TimeInQueue] and [OldestAge].
	TimeInQueue Latency
	// HandlerTime is how long handler calls took, batch items' included.
	HandlerTime Latency
	// Wanted is how many dequeuers the last scaling decision asked for
	// before [ScalingOptions.MaxDequeuers] capped it: more than the
	// maximum says the queue calls for more than the listener may run
	// (with [ScalingOptions.TargetWait], that the target cannot be met;
	// see [EventTargetUnmet]). Zero before the first decision, and
	// again once a receive finds the queue empty.
	Wanted int

	// HandledBefore counts, of Succeeded and Poisoned, the deliveries
	// deleted without running the handler: it had succeeded on an earlier
	// delivery of the same message (or the message had been copied to the
	// poison queue), and that delivery's delete failed. Such a delivery
	// never counts towards poisoning, nor is poisoned twice. The listener
	// remembers up to 10,000 of them.
	HandledBefore int64

	EmptyReceives int64 // receives that found nothing
	ScaleUps      int64 // times the listener added dequeuers
	ScaleDowns    int64 // idle dequeuers that stopped
	Wakes         int64 // wake-ups: [Listener.Notify] calls and sends seen through a [WakeSource]

	ReceiveErrors int64 // failed receive calls (each retried after a back-off)
	PoisonErrors  int64 // failed moves to the poison queue: the message stayed in its queue, released for a retry delay

	// LastError is the listener's last failed storage request, at
	// LastErrorAt; nil if none failed.
	LastError   error
	LastErrorAt time.Time
	// Fatal is the oldest fatal storage error still standing (see
	// [ErrFatal]), since FatalSince; nil when there is none. It stands until
	// a request of the same kind succeeds, or for 10 minutes after that kind
	// last failed (a delete that failed for a message that never came back).
	Fatal      error
	FatalSince time.Time

	// Transactions counts the storage requests this listener made: every
	// HTTP attempt through an [Account]'s clients (a [Queue], a [ShardedQueue]
	// over them, a payload store), and every call on a memqueue.Queue. A
	// [Source] of your own that makes neither is not seen here.
	Transactions Transactions

	// Batch items (see [Publisher.SendBatch]). A batch message is counted
	// above like any message; its items here. Item handler failures and
	// panics are also counted in Failed and Panics.
	Items          int64 // item handler calls made
	ItemsSucceeded int64 // items whose handler returned nil
	ItemsPoisoned  int64 // items moved to the poison queue on their own
	ItemsSkipped   int64 // items not run because a checkpoint says they were done
	Checkpoints    int64 // checkpoints written to batch blobs

	// Calls of a batch handler (see [NewBatchListener]), and the messages
	// they were given: CallMessages / Calls is the mean batch.
	Calls, CallMessages int64

	// Paused is the source's pause as last read (see [Pauser]); zero when
	// it is not paused.
	Paused PauseState

	// PayloadBytes is the payload bytes messages hold now: at most
	// [PayloadOptions.Memory] less the collector's headroom (half of
	// it at the default GOGC).
	PayloadBytes int64
}

// Latency summarizes durations a listener measured: how many in all, and
// the mean, median, 99th percentile and most of the recent ones (the
// latest 1,024 within five minutes, by the listener's clock: recent is
// about when they were measured, not what they measure).
type Latency struct {
	Count  int64 // measured since the listener was made
	Recent int   // of them, those the figures below are over; zero when none is recent
	Mean   time.Duration
	P50    time.Duration
	P99    time.Duration
	Max    time.Duration
}

// RetryCounts breaks [State.Retried] down by what caused each retry.
type RetryCounts struct {
	Error   int64 // the handler returned an error (or items of a batch did)
	Panic   int64 // the handler panicked
	Timeout int64 // the handler ran past [ListenerOptions.HandlerTimeout]
	// Storage counts the messages a storage request failed for before the
	// handler ran: reading the payload, or the record that says whether a
	// delayed message was cancelled or an occurrence delivered.
	Storage int64
	Poison  int64 // the move to the poison queue failed
}

// retryCause is why a message is retried: a field of [RetryCounts].
type retryCause int

const (
	causeError retryCause = iota
	causePanic
	causeTimeout
	causeStorage
	causePoison
	retryCauses
)

// stats holds a listener's counters.
type stats struct {
	inFlight, active                                       atomic.Int64
	received, succeeded, failed, retried, poisoned, panics atomic.Int64
	lost, released, renewed, receiveErrors, poisonErrors   atomic.Int64
	maxActive, idle, emptyReceives, scaleUps, scaleDowns   atomic.Int64
	wakes, handledBefore, rehidden, cancelled, duplicates  atomic.Int64
	snoozed, keyWaits, keysElsewhere, leasesLost           atomic.Int64
	orderWaits, orderSkips                                 atomic.Int64

	items, itemsSucceeded, itemsPoisoned, itemsSkipped, checkpoints atomic.Int64
	calls, callMessages                                             atomic.Int64

	retriedFor               [retryCauses]atomic.Int64
	wanted                   atomic.Int64
	timeInQueue, handlerTime latency.Window

	depthMu sync.Mutex
	depth   int
	depthAt time.Time
}

// setDepth records a depth read at.
func (s *stats) setDepth(depth int, at time.Time) {
	s.depthMu.Lock()
	s.depth, s.depthAt = depth, at
	s.depthMu.Unlock()
}

// started counts a dequeuer in, keeping the high-water mark.
func (s *stats) started() {
	n := s.active.Add(1)
	for {
		m := s.maxActive.Load()
		if n <= m || s.maxActive.CompareAndSwap(m, n) {
			return
		}
	}
}

// retry counts a message released for a retry, for why.
func (s *stats) retry(why retryCause) {
	s.retried.Add(1)
	s.retriedFor[why].Add(1)
}

func (s *stats) snapshot() State {
	now := time.Now()
	s.depthMu.Lock()
	depth, depthAt := s.depth, s.depthAt
	s.depthMu.Unlock()
	return State{
		InFlight:           int(s.inFlight.Load()),
		ActiveDequeuers:    int(s.active.Load()),
		MaxActiveDequeuers: int(s.maxActive.Load()),
		IdleDequeuers:      int(s.idle.Load()),
		Depth:              depth,
		DepthAt:            depthAt,
		EmptyReceives:      s.emptyReceives.Load(),
		ScaleUps:           s.scaleUps.Load(),
		ScaleDowns:         s.scaleDowns.Load(),
		Wakes:              s.wakes.Load(),
		Received:           s.received.Load(),
		Succeeded:          s.succeeded.Load(),
		Failed:             s.failed.Load(),
		Retried:            s.retried.Load(),
		Poisoned:           s.poisoned.Load(),
		Panics:             s.panics.Load(),
		Lost:               s.lost.Load(),
		Released:           s.released.Load(),
		Rehidden:           s.rehidden.Load(),
		Snoozed:            s.snoozed.Load(),
		KeyWaits:           s.keyWaits.Load(),
		KeysHeldElsewhere:  s.keysElsewhere.Load(),
		OrderWaits:         s.orderWaits.Load(),
		OrderGapsSkipped:   s.orderSkips.Load(),
		LeasesLost:         s.leasesLost.Load(),
		Cancelled:          s.cancelled.Load(),
		Duplicates:         s.duplicates.Load(),
		Renewed:            s.renewed.Load(),
		HandledBefore:      s.handledBefore.Load(),
		ReceiveErrors:      s.receiveErrors.Load(),
		PoisonErrors:       s.poisonErrors.Load(),
		Items:              s.items.Load(),
		Calls:              s.calls.Load(),
		CallMessages:       s.callMessages.Load(),
		ItemsSucceeded:     s.itemsSucceeded.Load(),
		ItemsPoisoned:      s.itemsPoisoned.Load(),
		ItemsSkipped:       s.itemsSkipped.Load(),
		Checkpoints:        s.checkpoints.Load(),
		RetriedFor: RetryCounts{
			Error: s.retriedFor[causeError].Load(), Panic: s.retriedFor[causePanic].Load(),
			Timeout: s.retriedFor[causeTimeout].Load(), Storage: s.retriedFor[causeStorage].Load(),
			Poison: s.retriedFor[causePoison].Load(),
		},
		TimeInQueue: Latency(s.timeInQueue.Summary(now)),
		HandlerTime: Latency(s.handlerTime.Summary(now)),
		Wanted:      int(s.wanted.Load()),
	}
}

// IdleFunc is asked by a dequeuer after each receive that found nothing, with
// the listener's state and how many empty receives in a row this dequeuer has
// made (1 on the first); after a receive that returned fewer messages than it
// asked for, it is asked with 1, since the queue had no more just then. It
// returns how long to wait before the next receive, and whether this dequeuer
// may stop. The listener honours stop only while more dequeuers run than its
// floor ([ScalingOptions.MinDequeuers], or none with
// [ScalingOptions.PushOnly]), and not within [ScalingOptions.ScaleInterval]
// of a scale-up. A wake-up ends the wait early and starts the count again, as
// does any message found. It is called from several goroutines at once.
type IdleFunc func(s State, idleCount int) (delay time.Duration, stop bool)

// RetryFunc returns how long a message whose handler failed stays hidden
// before its next try, given its dequeue count (1 after the first try).
type RetryFunc func(dequeueCount int64) time.Duration

// ExponentialIdle returns the randomized exponential back-off for empty
// queues that Microsoft's whitepaper "Best Practices for Maximizing
// Scalability and Cost Effectiveness of Queue-Based Messaging Solutions on
// Windows Azure" recommends: after the n-th empty receive in a row it waits
//
//	min(minIdle + (2^n − 1)·U[0.8δ, 1.2δ], maxIdle), δ = 100 ms,
//
// and at the cap it still draws from [0.8·maxIdle, maxIdle], so that the idle
// pollers of a fleet do not line up. It says stop once the curve has reached
// maxIdle; the listener keeps its floor of dequeuers whatever it says.
func ExponentialIdle(minIdle, maxIdle time.Duration) IdleFunc {
	return exponentialIdle(minIdle, maxIdle, rand.Float64)
}

// exponentialIdle is [ExponentialIdle] drawing its jitter from random.
func exponentialIdle(minIdle, maxIdle time.Duration, random func() float64) IdleFunc {
	return func(_ State, idleCount int) (time.Duration, bool) {
		return backoff.Idle(minIdle, maxIdle, idleCount, random(), random())
	}
}

// ExponentialRetry returns a [RetryFunc] that waits base·2^(n−1) after the n-th
// failed try, capped at maxDelay, with ±20% jitter so that messages that failed
// together do not come back together.
func ExponentialRetry(base, maxDelay time.Duration) RetryFunc {
	return func(dequeueCount int64) time.Duration {
		return backoff.Retry(base, maxDelay, dequeueCount, rand.Float64())
	}
}

// ScaleFunc returns how many dequeuers a listener should run, given its state
// and the queue's approximate depth (messages, including those being
// handled). The listener keeps the result between
// [ScalingOptions.MinDequeuers] and [ScalingOptions.MaxDequeuers], and only
// ever scales up on it: dequeuers scale down one by one, when the
// [ScalingOptions.Idle] hook tells an idle one to stop. It is called from one
// goroutine at a time.
type ScaleFunc func(s State, depth int) int

// ScaleByDepth returns the default [ScaleFunc]: one dequeuer for every perDequeuer
// messages waiting, rounded up. The listener uses its
// [ScalingOptions.BatchSize], so that each dequeuer has a full batch to
// receive.
func ScaleByDepth(perDequeuer int) ScaleFunc {
	perDequeuer = max(perDequeuer, 1)
	return func(_ State, depth int) int {
		return (max(depth, 0) + perDequeuer - 1) / perDequeuer
	}
}

// ScaleToWait returns a [ScaleFunc] that keeps messages' time in queue
// under target, for a listener that runs perDequeuer handler calls per
// dequeuer ([ListenerOptions.Concurrency]) and receives up to batch
// messages at once ([ScalingOptions.BatchSize]); [ScalingOptions.TargetWait]
// sets it up. By Little's law, messages arriving at λ a second that take h
// to handle keep λ·h handler calls busy, and a backlog of b is received
// within the target at b/target a second more: it asks for the dequeuers
// those calls need, from the arrival rate (what the listener received
// between two readings, and how the depth changed), the recent mean
// handler time ([State.HandlerTime]) and the backlog (the depth less the
// messages in hand). It never asks for fewer than one dequeuer per batch
// waiting, and while the recent 99th percentile of time in queue is over
// the target with more messages waiting than the running dequeuers hold,
// it asks for one more than run. With [ScalingOptions.TargetWait], a
// dequeuer whose receive drains the queue also stops while more run than
// the handlers' recent load needs, with a quarter more for headroom. Each
// ScaleFunc it returns keeps the readings it was given: give each
// listener its own.
//
// The depth counts hidden messages too (delayed ones, and those waiting
// for a retry), which it takes for a backlog: a queue that holds much
// delayed work reads as behind, and asks for more dequeuers than it needs.
// For batches, the handler time is an item's and the rate is of messages:
// it then asks for fewer than it needs.
func ScaleToWait(target time.Duration, perDequeuer, batch int) ScaleFunc {
	shape := latency.Shape{Target: target, PerDequeuer: perDequeuer, Batch: batch}
	var last struct {
		at       time.Time
		received int64
		depth    int
		rate     float64
	}
	return func(s State, depth int) int {
		now := time.Now()
		if !last.at.IsZero() {
			r := latency.Rate(s.Received-last.received, depth-last.depth, now.Sub(last.at))
			// Half the new reading, half what came before: one burst
			// does not set the rate for the next interval alone.
			last.rate = (last.rate + r) / 2
		}
		last.at, last.received, last.depth = now, s.Received, depth
		return latency.Dequeuers(latency.Load{
			Rate: last.rate, Handler: s.HandlerTime.Mean, Backlog: max(depth-s.InFlight, 0),
			Waited: s.TimeInQueue.P99, Active: s.ActiveDequeuers,
		}, shape)
	}
}

// readyReceiveFailures is how many failed receives in a row make a listener
// not ready: with the receive back-off (250 ms, 500 ms, 1 s, …) that is
// about two seconds of a storage account that does not answer.
const readyReceiveFailures = 3

// Ready reports whether the listener is doing its work: nil while [Listener.Run] is
// running and storage answers; otherwise an error matching [ErrNotReady] that
// says why: not running, a fatal error standing (a refused credential, a
// deleted or disabled queue, a poison queue that cannot be written), or
// receives failing several times in a row. A paused listener is ready (see
// [Listener.Paused]). It makes no request: probe it as often as you like.
func (l *Listener[T]) Ready() error {
	if !l.running.Load() {
		return fmt.Errorf("%w: not running", ErrNotReady)
	}
	if err, since := l.health.Fatal(time.Now()); err != nil {
		return fmt.Errorf("%w: fatal storage error since %s: %w", ErrNotReady, since.UTC().Format(time.RFC3339), err)
	}
	if n := l.health.ReceiveFailures.Load(); n >= readyReceiveFailures {
		err, _ := l.health.Last()
		return fmt.Errorf("%w: %d receives failed in a row; the last: %w", ErrNotReady, n, err)
	}
	return nil
}

// Degraded says what of the listener's source is out while the listener
// still does its work: for a [ShardedQueue], the shards that are out, and
// why (see [ShardedQueue.Degraded]); nil when nothing is, or the source
// cannot tell. [Listener.Ready] stays nil meanwhile: the other shards are
// received from. It makes no request: a readiness probe shows it.
func (l *Listener[T]) Degraded() error {
	if l.caps.Degraded != nil {
		return l.caps.Degraded()
	}
	return nil
}

// fatalTooLong returns the error Run ends with when a fatal error has stood
// for FatalTimeout; nil otherwise, or when FatalTimeout is not set.
func (l *Listener[T]) fatalTooLong(now time.Time) error {
	if l.opts.FatalTimeout <= 0 {
		return nil
	}
	err, since := l.health.Fatal(now)
	if err == nil || now.Sub(since) < l.opts.FatalTimeout {
		return nil
	}
	return wrapf(err, "listener on %q stopped after a fatal storage error stood for %v", l.src.Name(), now.Sub(since).Round(time.Second))
}

// fatalCheckEvery is how often Run looks for a fatal error that has stood
// for FatalTimeout: a tenth of it, between 100 ms and 5 s.
func (l *Listener[T]) fatalCheckEvery() time.Duration {
	return min(max(l.opts.FatalTimeout/10, 100*time.Millisecond), 5*time.Second)
}
