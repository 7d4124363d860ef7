// Package azdispatch dispatches work through Azure Storage queues: a typed
// [Publisher] puts messages on a queue, and a [Listener] receives them in
// batches, runs a handler for each, deletes what succeeded and retries what
// failed, moving what keeps failing to a poison queue.
//
//	account, err := azdispatch.NewAccountFromConnectionString(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"), nil)
//	if err != nil {
//		return err
//	}
//	queue, err := account.Queue("orders")
//	if err != nil {
//		return err
//	}
//	if err := queue.Create(ctx); err != nil { // once, where queues are made
//		return err
//	}
//	publisher, err := azdispatch.NewPublisher[Order](queue, nil)
//	if err != nil {
//		return err
//	}
//	if _, err := publisher.Send(ctx, Order{ID: 42}); err != nil {
//		return err
//	}
//	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
//		return ship(ctx, m.Body) // nil deletes the message; an error retries it
//	}, nil)
//	if err != nil {
//		return err
//	}
//	return listener.Run(ctx) // until ctx ends; then it drains
//
// The package's Example runs this against a private Azurite, and
// examples/quickstart does it end to end with failures and poison.
//
// # Delivery guarantee
//
// Delivery is at least once. A received message is hidden, not removed; the
// listener deletes it only after its handler returns nil. If the process dies
// first, or a delete fails, the message reappears when its visibility
// timeout ends and is handled again, with a higher DequeueCount. Handlers
// should therefore be idempotent. Nothing is deleted that was not handled,
// and nothing is moved to the poison queue without its text.
//
// # Life of a message
//
//	Publisher ── encode ──▶ Queue ──▶ Listener: receive up to 32, hidden for VisibilityTimeout
//	   ├─ dequeued more than MaxDequeueCount times ──▶ poison queue, then delete
//	   ├─ cannot be decoded ─────────────────────────▶ poison queue, then delete
//	   └─ handler (visibility renewed at half-life while it runs)
//	        ├─ nil ─────────────────▶ delete
//	        ├─ Permanent(err) ──────▶ poison queue, then delete
//	        ├─ error or panic ──────▶ hidden for the Retry delay (poisoned after the last try)
//	        └─ ownership lost ──────▶ nothing: another receiver has it
//
// A poisoned message is kept in a [PoisonEnvelope] (original text, ID,
// dequeue count, reason, times) in "<queue>-poison"; [Requeue] moves it back.
//
// # Failures
//
// Storage errors do not stop a listener: a failed receive is retried after a
// back-off (at least the service's Retry-After), a failed delete or release
// leaves the message to reappear, a stale pop receipt ([ErrOwnershipLost])
// means another receiver owns the message now. A message whose handler
// succeeded, or that was copied to the poison queue, but whose delete failed
// is remembered, and when it reappears it is only deleted: not handled
// again, not poisoned for it, not poisoned twice. Every outcome is counted
// in [State].
//
// Some errors will not pass by themselves: a refused credential (401, 403:
// a revoked key, an expired SAS, a missing role), a queue deleted or
// disabled. They match [ErrFatal]. The listener goes on trying, and reports
// them: an [EventFatal], [State].Fatal and FatalSince, and [Listener.Ready], which a
// daemon serves as its readiness probe; with FatalTimeout, Run returns the
// error once it has stood that long. A listener never creates the queue it
// reads from unless [ListenerOptions].CreateQueue says so, so a deleted queue
// is reported rather than replaced by an empty one.
//
// Memory is bounded in bytes as well as in messages: offloaded payloads in
// hand, and the text of every batch item in a handler, share
// [PayloadOptions.Memory] (256 MiB), and a download waits for room. A blob download is bounded by its progress (64 KiB per 30 s),
// not by a fixed time, so a large payload over a slow link completes.
//
// Errors from storage are [*StorageError] values, which name the request
// ([Op]) and keep the SDK's *azcore.ResponseError reachable with
// [errors.As], and never print a key or SAS signature. Arguments and
// options that cannot work are refused with a [*ConfigError] naming them.
//
// # Cost
//
// Every request to the storage service is a billable transaction, empty
// receives and retries included. A [Queue] counts its requests by kind
// ([Transactions]), and so do an [Account] and a [Listener];
// [CountTransactions] counts the requests made under one context. A busy listener makes about
// 1.03 requests per message (a receive per 32 messages and a delete each).
// An idle one backs off along the randomized exponential curve of
// Microsoft's whitepaper "Best Practices for Maximizing Scalability and Cost
// Effectiveness of Queue-Based Messaging Solutions on Windows Azure" (the
// Idle hook, [ExponentialIdle]) to one receive every 24 to 30 s: about 3,200
// requests a day, where a poller at a fixed second makes 86,400.
//
// # Scaling and wake-ups
//
// A listener runs between [ScalingOptions.MinDequeuers] (1) and
// [ScalingOptions.MaxDequeuers] (8) receive loops, each with up to
// Concurrency handlers. A dequeuer calls the handlers of its receive
// itself, one after another, while they are quick; once one takes 100 µs,
// the rest of its receive start side by side on other goroutines, and once
// none has started for about a millisecond (a handler that waits or
// hangs), its receive loop goes on in another goroutine too, so that a
// slow handler holds up neither the other messages it came with nor the
// next receive. When a dequeuer receives a full batch, the listener
// reads the queue's depth, at most once per ScaleInterval, and starts the
// dequeuers the Scale hook asks for; between readings, a round of full
// receives adds one dequeuer; a dequeuer whose idle back-off has reached its
// cap stops, down to the floor,
// but not within ScaleInterval of a scale-up. [Listener.Notify] ends the
// back-off at once. A send through the listener's own *Queue (or ShardedQueue) in the
// same process calls it; for publishers elsewhere, mount the endpoint
// package's WakeHandler and have them call its Notifier from
// [PublisherOptions].OnSent, which hears of every message sent visible at
// once, batches and offloaded ones included.
// With [ScalingOptions.PushOnly] and a Wake source, an idle listener makes no request at all.
//
// # Latency
//
// [MessageInfo.TimeInQueue] is how long a message waited before the receive
// that brought it, from when it first became visible (its insertion, or its
// due time), on the service's clock: the insertion time and the Date of the
// receive's answer, whole seconds, no local clock. [State.TimeInQueue]
// summarizes first deliveries, [State.HandlerTime] handler calls.
// [OldestAge] peeks the front messages of a queue (or of every shard) for
// the oldest one's age. With [ScalingOptions.TargetWait] a listener scales to a time in
// queue instead of to the depth alone ([ScaleToWait], by Little's law), and
// [EventTargetUnmet] says when MaxDequeuers cannot meet it.
//
// # Batches and claim check
//
// [Publisher.SendBatch] encodes many items, compresses them into one blob in
// a [PayloadStore] and sends one small pointer message: a batch costs about
// six requests end to end whatever its size, where n messages cost about
// 2n. The listener reads the blob in a stream and calls the handler once per
// item, with the same outcome rules as for a message; items that succeed
// are recorded on the blob (a checkpoint), so a redelivered batch runs only
// the rest, and an item that keeps failing is poisoned alone. An item's
// HandlerTimeout cancels that item's call only; the items beside it run on. When every
// item is done the message is deleted, then the blob.
//
// Every send takes one path: encode, then, when the text is over
// MaxMessageSize or would pass for a pointer, write it to a blob and send a
// pointer in its place (a claim check), then send plainly, delayed or with
// a key. The listener resolves the pointer before decoding, so a handler
// cannot tell. A pointer names an opaque blob ID in the listener's own
// container with its size and SHA-256, never a URL; a pointer that does not
// validate, or a blob that is missing or corrupt, is poisoned with the
// reason and nothing is deleted. [PayloadLimits] bound every read. [Sweep]
// removes blobs whose messages can no longer exist.
//
// # Many messages in one call
//
// [NewBatchListener] calls a [BatchHandler] with many messages at once: the
// messages of one receive, or up to [BatchOptions.MaxItems] gathered within
// [BatchOptions.MaxWait], of one key with [BatchOptions.ByKey]. Each
// message takes its own way through the listener (tries, poison, the
// payload budget, key limits, middleware) and is settled alone, by the
// outcome the handler gives it through [PerMessage]: one bad message is
// retried or poisoned without the others. Without a window a call costs no
// request more than handling its messages one at a time.
//
// # Sending later
//
// [Publisher.SendAfter], [Publisher.SendAt] and [Publisher.SendWith] send a
// message to be handled later, by any length of time, on the service's clock:
// every answer an account gets (errors too) sets it, and a decision about
// time that comes before any answer asks it first, with one request.
// Up to [MaxVisibility] (7 days) the service keeps it hidden on its own. Beyond,
// a line before the text records the due time, and a listener that receives
// the message early hides it again for what remains (at most 7 days): one
// Update Message a week, no try counted. [Publisher.Cancel] makes sure the
// handler never runs for a message, at any time before delivery;
// [SendOptions.UniqueKey] refuses a second send of a key within a window,
// across processes. Every send returns a [Sent]: its ID, due time, and the
// token a cancel needs. Both Cancel and unique keys keep small records in the [PayloadStore], which
// [Sweep] removes once expired.
//
// # Periodic dispatch
//
// A [Scheduler] sends messages on [Schedule]s (a fixed interval, a cron
// expression in a time zone, or a timetable of your own) through a
// Publisher. Run one in every instance of a service: each occurrence is
// claimed with a conditional write on one record per schedule, beside the
// payloads, and taken over from an instance that dies with it; each
// message carries its [Occurrence], and the first listener to deliver a
// message of an occurrence marks it, so that a duplicate (from an
// instance paused past its claim) is deleted unhandled. Between
// occurrences no instance makes a request. Occurrences missed while no
// instance ran are skipped, sent as one catch-up, or each sent, by the
// schedule's [Misfire] policy; the handler sees whether one is late in
// [MessageInfo.Occurrence].
//
// # Sharding, sets of queues and Lease
//
// Past one queue's target (about 2,000 messages/s) or one account's (about
// 20,000 requests/s), a [ShardedQueue] spreads one logical queue over many
// queues in many accounts; Listener and Publisher use it as they use a
// Queue. Sends go round-robin and route around failing shards, and around
// shards that do not answer: every request to a shard has its own deadline
// ([ShardedQueueOptions].TryTimeout), and one that gets no answer counts
// against the shard's account, which is then tried again by one request at
// a time ([ShardedQueue.Health], [ShardedQueue.Degraded]); SendKeyed
// keeps every message of a key on one shard ([KeyShard]); Subset gives each
// listener instance its own shards, so that messages never move between
// instances; receives pass over shards that were just empty, so an idle
// sharded queue costs what one queue costs. A message is deleted, hidden
// and poisoned through the shard it came from, each shard with its poison
// queue beside it. A rate limiter given as [AccountOptions].Limiter paces
// a process's requests to its share of an account's target, so that it does
// not find the target through 503 ServerBusy. A sharded queue offloads
// large messages and batches through one [PayloadStore], its first shard's
// unless [ShardedQueueOptions].Payloads names another.
//
// # Several queues at once
//
// A [QueueSet] is one [Source] over several queues that each keep their own
// messages (priority levels, classes of work, one queue per tenant), read by
// one Listener with one handler budget: [StrictPriority] reads a later queue
// only when those before it had none, with aging so a low level is never
// starved; [WeightedShares] and [FairShares] share the messages received by
// weight, or equally, while the queues have messages; [SetMember].Cap bounds
// one queue's messages in hand. Its queues are a fixed list, or every queue
// of an account with a name prefix, found again on an interval
// ([DiscoverQueueSet]). It reads, backs off and bounds its queues as a
// sharded queue does its shards, so an idle set costs what one idle queue
// costs, and a message is settled and poisoned in its own queue. The set
// counts each queue's messages in hand from what the listener tells it
// (the Settled capability, see [Capabilities]).
//
// # One at a time per key
//
// A message sent with a key ([SendOptions.Key]) carries it in its text, and
// the handler reads it as [MessageInfo.Key]. [LimitOptions].PerKey runs a
// key's messages that many at a time: across processes at no cost where
// keys are routed to one reader ([ShardedQueue.Subset] over keyed shards),
// or by a blob lease per key ([LimitOptions].AcrossInstances).
// [LimitOptions].InOrder runs each key's messages in the order one
// [Publisher] sent them, whatever order the queue gives them in.
// [LimitOptions].Fleet bounds the handler calls of every listener of a
// source. A message that waits for its key waits in hand, or is hidden
// again without counting a try, as a handler's [Snooze] hides it: waiting
// never poisons a message.
//
// [Lease] runs a function in one process of several at a time, over a blob
// lease: a single distributor that feeds many queues, with standbys that
// take over within a lease period and one try when it dies. A holder paused
// past its lease (a long GC, a frozen VM) can still write after its
// successor started; [LeaseFence] gives the function a number that grows with
// every holder, which writes carry so that storage refuses an older
// holder's.
//
// # Sources of your own
//
// Anything that implements [Source] can feed a [Listener]: a wrapper that
// traces or injects faults, a stand-in for tests. Its Receive returns
// [Delivery] values whose Receipt holds whatever it needs to delete or hide
// the message later; the listener hands each Delivery back unchanged. A
// [Shard] that has a poison queue beside it says so with [PoisonQueuer],
// and one with a payload store with [PayloadStorer]; listeners, publishers
// and sharded queues over it then use them by default. [Capabilities] lists
// every optional method a source can offer and what each enables, and
// [CapabilitiesOf] reads them; package sourcetest checks a source of your
// own against the contract the service keeps, and says which it offers.
//
// # Middleware and metadata
//
// [ListenerOptions].Middleware wraps every handler call, single messages and
// batch items alike, without knowing T: tracing, metrics, logging. A
// [Middleware] that is also a [StorageMiddleware] sees the listener's
// receives, deletes, releases and poison moves; [PublisherOptions].Middleware
// ([SendMiddleware]) sees every send. [ListenerOptions].RateLimit shares a
// quota for a downstream API between listeners, gating their receives so
// that what cannot start soon stays in the queue. A send middleware may
// attach [Metadata], string pairs that travel in
// the message's text (queue messages have no headers) and reach the
// handler and the listener's middleware in [MessageInfo].Metadata; a message sent without any is
// byte for byte what the codec wrote (a delayed one, with
// [PublisherOptions].PlainDelays). The otelazdispatch package is built
// on these seams: OpenTelemetry spans across the queue, the trace context
// in Metadata, and metrics, the billable transactions among them.
//
// # Operating it
//
// The endpoint package holds what a process serves over HTTP: Health, a
// process's readiness (every listener's [Listener.Ready]) and liveness (a
// Run that gave up) for Kubernetes probes; DepthHandler, the approximate
// depth of a queue, or the sum over a sharded queue's shards in every
// account, as JSON for KEDA's metrics-api scaler; and WakeHandler, with its
// Notifier, for wake-ups between processes. The azdispatch command (cmd/azdispatch) shows depths, peeks at
// messages, sends, lists, requeues and purges poison queues, and sweeps
// orphaned payloads, on one queue or a sharded set, from a shell.
//
// When what the handlers call is down, [Queue.Pause] (any [Pauser]) stops
// every listener of the queue, in every process, from receiving within a
// scale interval, until the pause ends on the service's clock or
// [Queue.Resume]; [Listener.Ready] stays nil meanwhile, and the depth
// endpoint asks for no worker.
//
// # Testing without storage
//
// The memqueue package is an in-memory Shard with the service's semantics:
// visibility timeouts, dequeue counts, pop receipts that go stale, TTLs and
// delays, with a clock a test moves and hooks that fail calls or lose their
// responses. The same conformance tests run against it and against Azurite,
// so that a handler's retries, poisoning and timeouts can be tested through
// a real Listener in milliseconds, with no emulator. Each queue offers a
// payload store in memory on its clock ([NewMemoryPayloadStore]), so claim
// checks, batches, cancels, unique sends, long delays and schedules run on
// it too.
//
// # Shutdown
//
// [Listener.Run] returns when its context ends and everything it started has
// stopped: it stops receiving, makes visible at once what it received but
// did not start, lets running handlers finish for DrainTimeout, then cancels
// their contexts and waits for them. A handler that ignores its cancelled
// context is abandoned 10 s later: Run returns [ErrHandlersAbandoned] naming
// its message, which reappears after its visibility timeout.
package azdispatch
