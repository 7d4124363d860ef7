package azdispatch

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/time/rate"
)

// ListenerOptions configures a [Listener]. Nil, or a zero field, means the
// documented default. The options most listeners set are its own fields;
// how many receive loops run and how they pace themselves is in Scaling,
// and how offloaded payloads are read and held is in Payloads.
type ListenerOptions struct {
	// Codec decodes message text into the listener's type; defaults to
	// [JSON](). A message it cannot decode is poisoned, never handled.
	Codec Codec

	// Concurrency is the most handler calls of one dequeuer at once, and,
	// without limits, the most messages it has in hand, so the listener
	// handles up to [ScalingOptions.MaxDequeuers] × Concurrency.
	// Defaults to 64, two full batches. A dequeuer receives again only once
	// half of Concurrency (at most [ScalingOptions.BatchSize]) is free, and
	// asks for no more than is free: received messages never wait hidden in
	// a local buffer, and a busy dequeuer asks for full batches of 32 while
	// the other 32 are being handled, so it makes about 1.03 requests per
	// message. With [LimitOptions.PerKey] or [LimitOptions.Classes] a
	// dequeuer has up to twice Concurrency in hand, while handler calls
	// stay at Concurrency per dequeuer: messages waiting for their key, its
	// lease or their class's place then do not leave handlers idle. For a
	// batch listener ([NewBatchListener]) it is the most batch calls of one
	// dequeuer at once, 2 by default, each of up to [BatchOptions.MaxItems]
	// messages.
	Concurrency int

	// Batch says how a batch listener forms its calls; only for
	// [NewBatchListener].
	Batch BatchOptions

	// Scaling says how many dequeuers (receive loops) run, how much each
	// asks for and how fast, and when they sleep, stop and wake. Its zero
	// value means the defaults of [ScalingOptions].
	Scaling ScalingOptions

	// VisibilityTimeout is how long a received message stays hidden from
	// other receivers, 1 s to 7 days. Defaults to 30 s: long enough that a
	// renewal is rarely needed, short enough that a message whose process
	// died is retried soon. While a handler runs, the listener renews it at
	// half-life.
	VisibilityTimeout time.Duration

	// HandlerTimeout bounds one handler call; its context then ends with
	// cause [ErrHandlerTimeout] and renewals stop, so a handler that ignores
	// its context lets the message reappear for another try. Defaults to
	// 10 minutes, so that a hung handler cannot hide a message forever;
	// negative means no limit.
	HandlerTimeout time.Duration

	// MaxDequeueCount is how many tries a message gets. A message delivered
	// more often than this (its handler kept failing, or its process kept
	// dying) is poisoned before the handler runs; a failure on the last try
	// poisons it at once. Defaults to 5, as the Azure Functions queue
	// trigger does. Every delivery counts, including one cut short by a
	// shutdown, so values below 3 poison messages that were never really tried.
	MaxDequeueCount int64

	// PoisonQueue receives the messages given up on, in a [PoisonEnvelope].
	// Defaults to the source's own (see [PoisonQueuer]): "<queue>-poison" in the same
	// account for a [Queue]; for a [ShardedQueue], the poison queue beside the
	// shard each message came from. Required for a source without one.
	PoisonQueue Target

	// Retry says how long a failed message stays hidden before its next
	// try. Defaults to [ExponentialRetry](time.Second, 5*time.Minute): a
	// transient fault gets about 15 s over the default 5 tries, and a
	// failing message does not come back hot. It is the least time between
	// tries: the message is received again when a receive next looks for
	// it, which over a [ShardedQueue] may be up to its
	// [ShardedQueueOptions.EmptySkip] (5 s) later, while its shard is passed
	// over as empty and other shards are busy.
	Retry RetryFunc

	// Middleware wraps every handler call, outermost first (see
	// [Middleware]); those that implement [StorageMiddleware] wrap the
	// listener's receives, deletes, releases and poison moves too. Defaults
	// to none, which costs nothing per message.
	Middleware []Middleware

	// Payloads says where the listener reads offloaded payloads (batches
	// and large messages) and how much of them it holds. Its zero value
	// means the defaults of [PayloadOptions].
	Payloads PayloadOptions

	// Limits bounds the handler calls that run at once: of one key (see
	// [SendOptions.Key]), and across every listener of the source.
	// Defaults to no limit.
	Limits LimitOptions

	// OnEvent, if set, is called on every scale-up, scale-down, idle
	// back-off and wake-up, and when a fatal storage error starts or ends
	// (see [EventKind]), from the listener's goroutines: it must be quick
	// and safe for concurrent use.
	OnEvent func(Event)

	// Logger receives the listener's logs. Defaults to none, but for
	// what needs a person: a fatal storage error (a queue that does not
	// exist, a refused credential), once each time it starts, goes to
	// [slog.Default] when no Logger is set.
	Logger *slog.Logger
	// alertsToDefault says fatal storage errors go to slog.Default, read
	// when one is logged: no Logger was set.
	alertsToDefault bool

	// DrainTimeout is how long [Listener.Run], once its context ends, lets running
	// handlers finish before cancelling their contexts (cause
	// [ErrDrainTimeout]). Run then still waits for them to return. Defaults to
	// 30 s; negative cancels at once.
	DrainTimeout time.Duration

	// FatalTimeout, if positive, makes [Listener.Run] shut down and return the error
	// once a fatal storage error (see [ErrFatal]) has stood for this long:
	// for a process whose supervisor should restart it, or page someone.
	// Defaults to 0: Run keeps trying until its context ends, and the fatal
	// state shows in [State], [Listener.Ready] and [EventFatal].
	FatalTimeout time.Duration

	// CreateQueue makes [Listener.Run] create the source's queue first if it is
	// missing (one request), retrying until it can. The source must be able
	// to (a [*Queue] or [*ShardedQueue]). Defaults to false: a listener never
	// creates the queue it reads from, so that a queue deleted on purpose,
	// or a name mistyped, is reported (a receive's 404 QueueNotFound is
	// fatal, see [ErrFatal]) rather than replaced by a new, empty queue.
	// Publishers create a missing queue on their first send.
	CreateQueue bool
}

// ScalingOptions is [ListenerOptions.Scaling]: how many dequeuers (receive
// loops) a [Listener] runs, how much each asks for and how fast, and when
// they sleep, stop and wake. A zero field means the documented default.
type ScalingOptions struct {
	// BatchSize is the most messages one receive asks for, 1 to 32.
	// Defaults to 32, the service maximum: a receive is billed the same
	// whatever it returns.
	BatchSize int

	// MinDequeuers is how many receive loops run however idle the queue is.
	// Defaults to 1: one poller, backing off along Idle. See PushOnly for none.
	MinDequeuers int

	// MaxDequeuers caps the receive loops, and with them the handler calls
	// at once (MaxDequeuers × [ListenerOptions.Concurrency], single messages
	// and the items of batches together). Defaults to 8: 512 handlers, and
	// 8 receives in flight, enough to reach one queue's target of 2,000
	// messages a second at 100 ms a round trip. The listener scales up from
	// the queue's depth (see Scale) and down as dequeuers go idle, but not
	// while handlers that return at once fill the process's cores (GOMAXPROCS).
	MaxDequeuers int

	// Scale says how many dequeuers the queue's depth calls for. Defaults to
	// [ScaleByDepth](BatchSize): one per batch waiting. The depth is read
	// after a full receive, at most once per ScaleInterval, since each read
	// is a billable request. Between readings the receives themselves say
	// what they can: once as many come back full as dequeuers run, one more
	// starts (an [EventScaleUp] with Depth -1), so that a burst soon after a
	// reading does not wait out the interval.
	Scale ScaleFunc

	// TargetWait, if set, is the time in queue (see [State.TimeInQueue])
	// the listener scales to, instead of to the depth alone: it runs the
	// dequeuers that the arrival rate, the handler time and the backlog
	// call for to keep messages under it (see [ScaleToWait]), and the
	// default Idle backs off to at most half of it (1 s to 30 s), so that a
	// message sent to a quiet queue does not wait out a long back-off; a
	// dequeuer whose receive drains the queue stops while more run than
	// the handlers' recent load needs. An idle listener polls more often: at a target of 10 s, about 17,000
	// receives a day instead of 3,200. When the target calls for more
	// dequeuers than MaxDequeuers, an [EventTargetUnmet] says so. It
	// cannot be set with Scale.
	TargetWait time.Duration

	// ScaleInterval is the least time between two depth reads, and how long
	// after a scale-up no dequeuer may stop, so that the listener does not
	// oscillate. Defaults to 10 s: a busy listener adds at most 8,640
	// requests a day, and an idle one none.
	ScaleInterval time.Duration

	// Idle is the back-off after a receive that found nothing, and says when
	// an idle dequeuer may stop. Defaults to [ExponentialIdle](0, 30*time.Second):
	// a new message on a quiet queue waits at most 30 s unless a wake-up
	// comes, and an idle listener settles at one poll every 24–30 s: about
	// 3,200 requests a day, 96,000 a 30-day month, against 2.6 million for a
	// poller at a fixed 1 s. (The README prices them.)
	Idle IdleFunc

	// PushOnly lets the last dequeuer stop too once it is idle (a push-only
	// listener: MinDequeuers 0). An idle listener then makes no request
	// at all, and only a wake-up starts a dequeuer again: [Listener.Notify], a send
	// through the same [*Queue] in this process, or Wake. It requires Wake,
	// which declares where wake-ups come from (set it to the *Queue itself
	// when the publishers are in this process); with no wake-up, sent
	// messages wait until the next one. Messages the listener itself let go
	// of (released for a retry, or left hidden by a receive, renewal,
	// delete or release that failed) need none: it starts a dequeuer when
	// they are surely visible again (up to a second after their visibility
	// timeout, which the service counts in whole seconds), and over a
	// [ShardedQueue] that receive asks every shard. A delayed send
	// ([SendOptions.Delay]) needs one: it wakes no one when it comes due.
	PushOnly bool

	// Wake is a source of wake-ups besides the listener's own queue (whose
	// sends in this process wake it anyway), such as an endpoint.WakeHandler
	// that other processes POST to. Defaults to none.
	Wake WakeSource

	// RateLimit, if set, starts handler calls no faster than it allows:
	// for a downstream API with a quota. Listeners (of any types, in one
	// process) given the same limiter share it.
	//
	// The limit gates receives, not only calls: a listener books the turns
	// of the messages it asks for before each receive, and asks for no
	// more messages than it has turns for soon (it keeps about half a
	// second booked, or an eighth of [ListenerOptions.VisibilityTimeout] if
	// that is shorter, and never books further ahead than a quarter of it).
	// So the messages it cannot start soon stay in the queue, visible to
	// other workers, not hidden in this process waiting for a turn and
	// renewed meanwhile. A received message waits for its turn before its
	// handler call, outside [ListenerOptions.HandlerTimeout]. A listener
	// books more turns only as those it holds come due, at most a quarter
	// of a second's worth at once, so listeners sharing a limiter take
	// turns in proportion to their demand: one with a backlog never books
	// the limiter far ahead of another. Turns a receive found no message
	// for are given back.
	//
	// Every message received takes a turn, whether or not its handler
	// runs (one poisoned without a call takes one too). A batch message's
	// turn is its first item's; each further item waits for a turn of its
	// own while the batch is in hand, renewed if that takes long. A rate
	// of 0 pauses receiving once its burst is spent, until the rate is
	// raised (the limiter is looked at again every second); a burst of 0
	// with a finite rate gives no turns at all, and is refused. Nil, the
	// default, means no limit.
	RateLimit *rate.Limiter
}

// PayloadOptions is [ListenerOptions.Payloads]: where a [Listener] reads
// the offloaded payloads (batches and large messages) that pointer messages
// name, and how much of them it holds. A zero field means the documented
// default.
type PayloadOptions struct {
	// Store is where the listener reads offloaded payloads: the store its
	// publishers use ([PublisherOptions.Payloads]). Defaults to the source's
	// own store, if it is a [PayloadStorer]: for a [*Queue], its account's
	// (container [DefaultPayloadContainer]); for a [ShardedQueue], the one its
	// options name or its first shard's. A listener with none (a queue
	// opened by SAS URL) poisons pointer messages with [ErrNoBlobService]
	// as the reason; their blobs are then not marked as poisoned, so
	// requeue them before [Sweep]'s rule lets their blobs go.
	Store *PayloadStore

	// Limits bound what one pointer may make the listener download,
	// inflate and decode. Zero fields mean the defaults of [PayloadLimits].
	Limits PayloadLimits

	// Continue opens, by name, the queue a group's continuation goes to
	// when a child this listener finishes completes its group (see
	// [PayloadStore.StartGroup]). Defaults to its account's queue of that
	// name for a [*Queue], and to the source itself if it has that name.
	Continue func(queue string) (Target, error)

	// Memory bounds, in bytes, the heap that the offloaded payloads
	// the listener holds take, garbage included: a message reserves its
	// blob's size plus [PayloadLimits.MaxItemSize] before downloading it (a
	// batch then keeps its blob and room to read its largest item; a single
	// message keeps only its text once inflated), every batch item in a
	// handler holds its text's size besides, and each waits, hidden and
	// renewed, while the budget is spent (a batch then runs one item at a
	// time). Go's collector lets the heap grow by GOGC percent (100 by
	// default) of the live heap before it collects, so the listener keeps
	// the payloads it holds live to Memory × 100 / (100 + GOGC):
	// half of it at the default setting, and a flood of large payloads
	// shows a heap near Memory, not twice it (measured: the README's failure
	// table, "a flood of large payloads").
	// That is what payloads add: the collector's headroom is a share of all
	// the live heap, so a process that keeps H of its own live may reach
	// twice H, and payloads' garbage may fill that headroom as the
	// process's own would; at the default setting the heap stays under
	// 2 × H + Memory. For a cap on the whole process, set GOMEMLIMIT.
	// With GOGC=off, which leaves collection to GOMEMLIMIT, payloads may
	// take all of Memory live: set GOMEMLIMIT above it and the rest
	// of the process. GOGC is read when the listener is made. Inline
	// messages (at most 64 KiB each) are not counted: the messages in
	// hand bound them ([ListenerOptions.Concurrency]). Defaults to 256
	// MiB, sized for a small container; negative means no bound. Without it, 512 messages of 16 MiB each would take
	// 8 GiB, and twice that in heap.
	Memory int64

	// CheckpointInterval is how often a batch in progress records its
	// completed items on its blob (one request each time, only if items
	// completed since the last), so that a process that dies mid-batch loses
	// at most this much work. A batch also checkpoints whenever it is
	// released with items done. Defaults to 30 s; negative means only on release.
	CheckpointInterval time.Duration
}

// LimitOptions limit how many handler calls run at once: of one key
// ([SendOptions.Key]), and across every listener of the source.
//
// PerKey runs a key's messages that many at a time (1: one at a time), for
// the races between messages of one customer, order or account. It holds
// across processes in one of two ways:
//   - every message of a key reaches one reader: a [ShardedQueue] keeps a
//     key on one shard, and [ShardedQueue.Subset] gives each shard one
//     reader. This costs no request at all.
//   - AcrossInstances: each place of a key is a blob lease in the payload
//     store, held while this listener runs messages of the key. This
//     costs two Lease Blob requests per message whose key this listener
//     did not hold already (a message that waited in hand for a place of
//     its key takes the lease with the place), and a Put Blob the first
//     time a key's place is used.
//
// Without either, the limit is this listener's alone: messages of a key
// that reach two processes may run in both.
//
// A message whose key is at its limit waits in hand, hidden, first come
// first served, for at most Wait, and costs no request while it waits; at
// most Line messages of a key wait at once. One that finds the line full,
// or waits in vain, is snoozed (see [Snooze]): hidden again for Snooze, one
// Update Message, without counting a try, so that a message is never
// poisoned for waiting. A message without a key is not limited by PerKey.
//
// Fleet bounds the handler calls of every listener of the source (by name)
// that sets it, for a downstream that takes no more: each call holds one
// of Fleet places, a blob lease in the payload store. A listener keeps a
// place it took while its calls keep using it, renewing its lease, and
// gives it up once it has been idle for a second, or held for 30 s (so
// that a busy listener does not keep places from the others for good):
// under a steady load a call costs no request. A call that finds every
// place held waits in hand, and the listener looks for a free place, a
// few of them at a time, about every 200 ms.
//
// InOrder runs a key's messages one at a time and in the order one
// [Publisher] sent them, whatever order the queue gives them in (the
// service, and Azurite, are only typically first in, first out). A
// publisher stamps each keyed message with the key's last message whose
// send had succeeded when it began ([MetadataOrder]); a message runs once
// that one is done: handled, or given up as poison. It implies PerKey 1 and
// AcrossInstances, and the key's order lives in its lease blob's metadata:
// beyond AcrossInstances' requests, a message costs one Set Blob Metadata,
// and a Get Blob Properties when another process wrote the key last. A
// message that arrives before the one it follows is snoozed, without a
// try, and the first of a key to find it stuck writes when (one more Set
// Blob Metadata). Messages of one key from different publishers are in no
// order between them: send a key's messages through one Publisher when
// their order matters. A predecessor that never comes (it expired, was
// cancelled or purged, or was poisoned before it could take its key) is
// given up once the key has been stuck for OrderWait, counted in
// [State.OrderGapsSkipped], and the messages after it go on.
//
// Leases hold a place while their holder renews them: a process that
// dies holds its places until their leases expire (30 s), and one paused
// longer than that (a stopped VM, a debugger) may find its place taken
// when it resumes, and run one call past the limit until its call ends.
type LimitOptions struct {
	// PerKey is how many messages of one key run at once; 0 sets no
	// limit.
	PerKey int
	// Line is how many messages of one key wait in hand at once: each
	// holds a slot of its dequeuer's while it waits (see
	// [ListenerOptions.Concurrency]).
	// Defaults to 8.
	Line int
	// Wait is how long a message waits in hand for its key before it is
	// snoozed. Defaults to half the VisibilityTimeout, so that a wait
	// needs no renewal.
	Wait time.Duration
	// AcrossInstances holds PerKey across every listener of the same
	// source (by name) that sets it, with a blob lease per place of a key
	// in ListenerOptions.Payloads.Store's container, under
	// "keys/<source>/". A process that dies holds its keys until their
	// leases expire (30 s); their messages are snoozed meanwhile. A key
	// whose every place is held by another listener is snoozed, as is one
	// whose lease cannot be taken (storage refuses, or does not answer).
	AcrossInstances bool
	// Snooze is how long a message that cannot wait is hidden again, plus
	// a random whole number of seconds up to half of it (up to a second
	// when that is less), so that a key's messages do not come back
	// together. Defaults to 1 s: hidden 1 or 2 s.
	Snooze time.Duration
	// InOrder runs each key's messages in the order one publisher sent
	// them (see above). It needs a payload store.
	InOrder bool
	// OrderWait is how long a key stays stuck for a message that has not
	// come before the messages after it go on without it, by the
	// service's clock. Defaults to 10 minutes. Keep it well above what a
	// message may wait for its key (its snoozes; a dead process's lease,
	// 30 s): a wait of seconds gives up messages that are only waiting.
	OrderWait time.Duration
	// Fleet is how many handler calls run at once across every listener
	// of the source that sets it, by blob leases in
	// ListenerOptions.Payloads.Store's container, under
	// "fleet/<source>/"; 0 sets no such limit. Every listener must set
	// the same Fleet.
	Fleet int
	// Classes bound the handler calls of classes of keys across every
	// listener of the source that sets them, as Fleet bounds them all:
	// for a downstream that one kind of message calls (a payment
	// provider's API, a legacy system) and that takes no more than so
	// many at once, while the rest of the queue runs freely. See
	// [KeyClass].
	Classes []KeyClass
}

// defaultOrderWait is LimitOptions.OrderWait's default: long past any
// reshuffle of a queue's order, well short of a message's life.
const defaultOrderWait = 10 * time.Minute

// withDefaults returns k with defaults filled in and every field checked.
func (k LimitOptions) withDefaults(vis time.Duration) (LimitOptions, error) {
	switch {
	case k.PerKey < 0:
		return k, badListenerOption("Limits.PerKey", "%d is negative", k.PerKey)
	case k.Fleet < 0:
		return k, badListenerOption("Limits.Fleet", "%d is negative", k.Fleet)
	case k.Line < 0:
		return k, badListenerOption("Limits.Line", "%d is negative", k.Line)
	case k.Wait < 0:
		return k, badListenerOption("Limits.Wait", "%v is negative", k.Wait)
	case k.Snooze < 0 || k.Snooze > MaxVisibility:
		return k, badListenerOption("Limits.Snooze", "%v is not between 0 and 7 days", k.Snooze)
	case k.OrderWait < 0:
		return k, badListenerOption("Limits.OrderWait", "%v is negative", k.OrderWait)
	case k.InOrder && k.PerKey > 1:
		return k, badListenerOption("Limits.PerKey", "%d: InOrder runs a key's messages one at a time", k.PerKey)
	}
	if err := checkClasses(k.Classes); err != nil {
		return k, err
	}
	k.Classes = slices.Clone(k.Classes) // the caller's stays theirs
	if k.InOrder {
		k.PerKey, k.AcrossInstances = 1, true
	}
	setDefault(&k.OrderWait, defaultOrderWait)
	setDefault(&k.Line, 8)
	setDefault(&k.Wait, vis/2)
	setDefault(&k.Snooze, time.Second)
	return k, nil
}

// defaultPayloadMemory is PayloadOptions.Memory's default: room for a few
// large payloads in a small container, far from the gigabytes that 512
// messages of 16 MiB each would take.
const defaultPayloadMemory = 256 << 20

// withDefaults returns a copy of o (which may be nil) with defaults filled in
// and every field checked.
func (o *ListenerOptions) withDefaults(src Source, caps Capabilities) (ListenerOptions, error) {
	var cfg ListenerOptions
	if o != nil {
		cfg = *o
	}
	if cfg.Codec == nil {
		cfg.Codec = JSON()
	}
	setDefault(&cfg.Concurrency, 64)
	setDefault(&cfg.VisibilityTimeout, 30*time.Second)
	setDefault(&cfg.HandlerTimeout, 10*time.Minute)
	setDefault(&cfg.MaxDequeueCount, 5)
	setDefault(&cfg.DrainTimeout, 30*time.Second)
	if cfg.Retry == nil {
		cfg.Retry = ExponentialRetry(time.Second, 5*time.Minute)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
		cfg.alertsToDefault = true
	}
	if cfg.PoisonQueue == nil {
		if q := caps.poisonQueue(); q != nil {
			cfg.PoisonQueue = q
		}
	}
	var err error
	if cfg.Scaling, err = cfg.Scaling.withDefaults(cfg.Concurrency); err != nil {
		return cfg, err
	}
	if cfg.Payloads, err = cfg.Payloads.withDefaults(caps); err != nil {
		return cfg, err
	}
	if cfg.Limits, err = cfg.Limits.withDefaults(cfg.VisibilityTimeout); err != nil {
		return cfg, err
	}
	switch {
	case cfg.Limits.InOrder && cfg.Payloads.Store == nil:
		return cfg, badListenerOption("Limits.InOrder", "needs a payload store for its keys' leases and order: set Payloads.Store")
	case cfg.Limits.AcrossInstances && cfg.Payloads.Store == nil:
		return cfg, badListenerOption("Limits.AcrossInstances", "needs a payload store for its leases: set Payloads.Store")
	case cfg.Limits.Fleet > 0 && cfg.Payloads.Store == nil:
		return cfg, badListenerOption("Limits.Fleet", "needs a payload store for its leases: set Payloads.Store")
	case len(cfg.Limits.Classes) > 0 && cfg.Payloads.Store == nil:
		return cfg, badListenerOption("Limits.Classes", "needs a payload store for its leases: set Payloads.Store")
	}
	return cfg, cfg.check(src, caps)
}

// check reports the first of o's own fields that is invalid once the
// defaults are in; the groups check theirs as they fill them in.
func (o *ListenerOptions) check(src Source, caps Capabilities) error {
	switch {
	case o.Concurrency < 1:
		return badListenerOption("Concurrency", "%d is less than 1", o.Concurrency)
	case o.VisibilityTimeout < time.Second || o.VisibilityTimeout > MaxVisibility:
		return badListenerOption("VisibilityTimeout", "%v is not between 1s and 7 days", o.VisibilityTimeout)
	case o.MaxDequeueCount < 1:
		return badListenerOption("MaxDequeueCount", "%d is less than 1", o.MaxDequeueCount)
	case o.PoisonQueue == nil:
		return badListenerOption("PoisonQueue", "required: source %q has no default poison queue", src.Name())
	case o.FatalTimeout < 0:
		return badListenerOption("FatalTimeout", "%v is negative", o.FatalTimeout)
	case o.CreateQueue && caps.Create == nil:
		return badListenerOption("CreateQueue", "source %q cannot create its queue (it has no Create method)", src.Name())
	}
	for i, m := range o.Middleware {
		if m == nil {
			return badListenerOption("Middleware", "[%d] is nil", i)
		}
	}
	return nil
}

// withDefaults returns s with defaults filled in and every field checked.
// concurrency is ListenerOptions.Concurrency, which a TargetWait scales by.
func (s ScalingOptions) withDefaults(concurrency int) (ScalingOptions, error) {
	setDefault(&s.BatchSize, MaxBatch)
	setDefault(&s.MinDequeuers, 1)
	setDefault(&s.MaxDequeuers, 8)
	setDefault(&s.ScaleInterval, 10*time.Second)
	switch {
	case s.TargetWait < 0:
		return s, badListenerOption("Scaling.TargetWait", "%v is negative", s.TargetWait)
	case s.TargetWait > 0 && s.Scale != nil:
		return s, badListenerOption("Scaling.TargetWait", "conflicts with Scale: set one")
	case s.TargetWait > 0:
		s.Scale = ScaleToWait(s.TargetWait, concurrency, s.BatchSize)
	case s.Scale == nil:
		s.Scale = ScaleByDepth(s.BatchSize)
	}
	if s.Idle == nil {
		// A latency target would be missed by a long back-off on a quiet
		// queue: back off to at most half of it.
		maxIdle := 30 * time.Second
		if s.TargetWait > 0 {
			maxIdle = min(max(s.TargetWait/2, time.Second), maxIdle)
		}
		s.Idle = ExponentialIdle(0, maxIdle)
	}
	switch {
	case s.BatchSize < 1 || s.BatchSize > MaxBatch:
		return s, badListenerOption("Scaling.BatchSize", "%d is not between 1 and %d", s.BatchSize, MaxBatch)
	case s.MinDequeuers < 1:
		return s, badListenerOption("Scaling.MinDequeuers", "%d is less than 1 (for none, set PushOnly)", s.MinDequeuers)
	case s.MaxDequeuers < s.MinDequeuers:
		return s, badListenerOption("Scaling.MaxDequeuers", "%d is less than MinDequeuers (%d)", s.MaxDequeuers, s.MinDequeuers)
	case s.PushOnly && s.MinDequeuers > 1:
		return s, badListenerOption("Scaling.PushOnly", "conflicts with MinDequeuers %d", s.MinDequeuers)
	case s.PushOnly && s.Wake == nil:
		return s, badListenerOption("Scaling.PushOnly", "requires Wake: with no wake-up source nothing would ever receive")
	case s.ScaleInterval < 0:
		return s, badListenerOption("Scaling.ScaleInterval", "%v is negative", s.ScaleInterval)
	case s.RateLimit != nil && s.RateLimit.Burst() < 1 && s.RateLimit.Limit() != rate.Inf:
		return s, badListenerOption("Scaling.RateLimit", "a burst of %d gives no turns", s.RateLimit.Burst())
	}
	return s, nil
}

// withDefaults returns p with defaults filled in and every field checked;
// the store defaults to the one caps name.
func (p PayloadOptions) withDefaults(caps Capabilities) (PayloadOptions, error) {
	setDefault(&p.Memory, defaultPayloadMemory)
	setDefault(&p.CheckpointInterval, 30*time.Second)
	if p.Store == nil {
		p.Store = caps.payloadStore()
	}
	var err error
	p.Limits, err = p.Limits.withDefaults("ListenerOptions.Payloads.Limits")
	return p, err
}

// badListenerOption is the error for field, a path below ListenerOptions.
func badListenerOption(field, reason string, args ...any) error {
	return &ConfigError{Field: "ListenerOptions." + field, Reason: fmt.Sprintf(reason, args...)}
}

// setDefault sets *v to def when it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
