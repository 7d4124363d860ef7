// Package otelazdispatch traces and measures [azdispatch] publishers and
// listeners with OpenTelemetry, by the messaging semantic conventions
// (semconv v1.43.0; the messaging conventions are still in development
// upstream, and this package follows the version it names), and carries
// the trace context through the queue so that a handler's span is linked to
// the send that made its message.
//
// It uses the OpenTelemetry API only: the application chooses the SDK and
// exporters. One [Instrumentation] serves every publisher and listener:
//
//	inst, err := otelazdispatch.New(&otelazdispatch.Options{Propagate: true})
//	publisher, err := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{
//		Middleware: []azdispatch.SendMiddleware{inst},
//	})
//	listener, err := azdispatch.NewListener(queue, handle, &azdispatch.ListenerOptions{
//		Middleware: []azdispatch.Middleware{inst},
//	})
//	reg, err := inst.ObserveAccounts(account)           // billable transactions
//	reg, err = inst.ObserveListener("orders", listener) // dequeuers, in flight, retries, …
//	reg, err = inst.ObserveAge(queue, nil)              // in one instance only: it peeks
//
// # Spans
//
//   - "send {queue}", PRODUCER, per Send, SendWith, SendAfter, SendAt, SendKeyed and SendBatch:
//     the send's context is the message's creation context (a batch is one
//     message, so its items share it).
//   - "receive {queue}", CLIENT, per receive request, with
//     messaging.batch.message_count and a link to the creation context of
//     each message it brought.
//   - "process {queue}", CONSUMER, per handler call (a message, or one item
//     of a batch), linked to the message's creation context. It is a child of
//     the context the listener calls it with, which has no span, so each
//     process span starts a trace of its own unless [Options.ParentFromMessage]
//     makes the creation context its parent as well (for single messages,
//     as the conventions allow).
//   - "delete {queue}", "release {queue}" and "poison {queue}", CLIENT, the
//     settle operations (messaging.operation.type settle; the conventions
//     name a span after its operation name), per delete, release and move
//     to the poison queue, linked to the message's creation context.
//
// Spans on the listener's side start new traces (joined to the producer's
// by links), even when Run was called inside a span, so that a listener's
// whole life is not one trace. For a ShardedQueue, messaging.destination.name
// is the shard a message came from on process and settle spans, and the
// sharded queue's name on send and receive spans.
//
// Attributes: messaging.system ([System]), messaging.operation.name and
// .type, messaging.destination.name, messaging.message.id,
// messaging.message.body.size, error.type, and of this package
// azdispatch.message.dequeue_count, azdispatch.batch.id and
// azdispatch.batch.item.
//
// # Trace context through the queue
//
// A Storage queue message has no headers. With [Options.Propagate], the send
// injects the trace context (W3C traceparent and tracestate, or whatever
// the propagator writes) as [azdispatch.Metadata], which travels as a first
// line of the message text; listeners read it whether or not they
// propagate. It is off by default because that line would change the
// message text, which a queue shared with the Azure Functions queue trigger
// must not see; without it the text is byte for byte what the codec wrote
// (a delayed message's, with azdispatch.PublisherOptions.PlainDelays).
// Listeners of azdispatch versions before Metadata poison a message with
// the line: turn Propagate on once every listener of the queue is upgraded.
// See azdispatch.Metadata for how it survives claim checks, batches, poison
// queues and Requeue, and what it costs (its bytes count against
// MaxMessageSize).
//
// # Metrics
//
// The metrics of this package's own (azdispatch.*) but
// azdispatch.storage.* have messaging.system and
// messaging.destination.name, and the attributes named below.
//
//   - messaging.client.sent.messages, messaging.client.consumed.messages
//     (counted per receive), messaging.client.operation.duration (send,
//     receive and settle requests), messaging.process.duration (handler
//     calls), by the conventions, with messaging.operation.name and .type,
//     and error.type on failures;
//   - azdispatch.message.time_in_queue (s, histogram): how long a message
//     waited before its first delivery ([azdispatch.MessageInfo.TimeInQueue]),
//     recorded per handler call (each item of a batch counts) on first
//     deliveries only: a retry waits by design, for its retry delay, and
//     counting it would make a queue that keeps up look behind whenever
//     handlers fail. Both ends are the service's times (the insertion or
//     due time, and the receive's Date), so clock skew does not enter, but
//     they are whole seconds: the buckets are 0, 1, 2, 5, 10, 30 s, 1, 2,
//     5, 10, 30 min, 1, 2, 6 and 24 h, none under a second;
//   - azdispatch.message.end_to_end (s, histogram, same buckets): from a
//     message's insertion ([azdispatch.MessageInfo.InsertedAt], the service's
//     clock) to the end of a handler call for it (the listener's clock), on
//     every call, with error.type when the call failed: a successful call's
//     value is how long the message took from its send to done, retries and
//     (for a message sent for later) its delay included. It crosses two
//     clocks, so skew between the listener's and the service's enters it
//     (a value below zero, from a listener's clock behind, is recorded as
//     0), unlike time_in_queue; the insertion time is whole seconds;
//   - azdispatch.storage.transactions: the billable storage requests made
//     through the accounts given to [Instrumentation.ObserveAccounts], by kind
//     (azdispatch.transaction.kind), account (azdispatch.account) and, for
//     queue requests, queue; azdispatch.storage.empty_receives, the receives
//     that found nothing, which is what idle polling costs;
//   - for the listeners given to [Instrumentation.ObserveListener]:
//     azdispatch.listener.dequeuers (by azdispatch.dequeuer.state, busy or
//     idle), azdispatch.listener.in_flight, azdispatch.listener.poisoned,
//     azdispatch.listener.payload_memory (By);
//     azdispatch.listener.retries (counter, by azdispatch.retry.reason:
//     error, panic, timeout, storage or poison, from
//     [azdispatch.State.RetriedFor]); azdispatch.listener.rehidden (counter:
//     delayed messages received early and hidden again,
//     [azdispatch.State.Rehidden]); azdispatch.listener.wanted_dequeuers
//     (gauge: what the last scaling decision asked for before the maximum
//     capped it, [azdispatch.State.Wanted]; above the maximum, the queue
//     calls for more than the listener may run); and
//     azdispatch.listener.time_in_queue.p99 (s, gauge: the listener's own
//     99th percentile of its recent first deliveries' time in queue,
//     [azdispatch.State.TimeInQueue], observed only while some are recent;
//     the histogram above is the one to aggregate across listeners);
//   - azdispatch.queue.oldest_age (s, gauge) for the sources given to
//     [Instrumentation.ObserveAge]: the age of the oldest of the front
//     messages of the queue ([azdispatch.OldestAge]), read at most once per
//     [ReadingOptions.Every] at one billable peek per queue or shard; and
//     azdispatch.queue.oldest_age_failures, the readings that failed and
//     observed nothing;
//   - azdispatch.group.children (gauge) for the groups given to
//     [Instrumentation.ObserveGroup]: a group's children by
//     azdispatch.group.state (succeeded, failed, pending), read at most
//     once per [ReadingOptions.Every]; and azdispatch.group.read_failures;
//   - azdispatch.poison.requeued: the messages moved back from a poison
//     queue, counted by [Instrumentation.CountRequeue] in the process that
//     requeues (an operator's tool), by the queue they went back to.
//
// # With the Azure SDK's own tracing
//
// The Azure SDK for Go traces HTTP attempts when its client options carry
// a tracing provider (azotel.NewTracingProvider), but only for requests
// made inside a span that the SDK's client started itself; the storage
// modules azdispatch is built on (azqueue v1.0.1, azblob v1.8.3) start none,
// so today they add no spans at all. Should a later version add them, they
// would nest under this package's: every request made for a receive, a
// settle or a send carries that operation's span in its context, so an
// HTTP span per attempt, retries included, would be its child, and nothing
// would be counted twice. This package makes no HTTP spans of its own, and
// neither makes metrics of the other's. Payload reads, checkpoints and
// visibility renewals have no span of this package; the transaction
// counter counts them, with every other HTTP attempt, because the service
// bills each one.
package otelazdispatch
