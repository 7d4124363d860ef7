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
//	reg, err := inst.ObserveAccounts(account)       // billable transactions
//	reg, err = inst.ObserveListener("orders", listener) // dequeuers, in flight, poisoned
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
// must not see; without it the text is byte for byte what the codec wrote.
// Listeners of azdispatch versions before Metadata poison a message with
// the line: turn Propagate on once every listener of the queue is upgraded.
// See azdispatch.Metadata for how it survives claim checks, batches, poison
// queues and Requeue, and what it costs (its bytes count against
// MaxMessageSize).
//
// # Metrics
//
//   - messaging.client.sent.messages, messaging.client.consumed.messages
//     (counted per receive), messaging.client.operation.duration (send,
//     receive and settle requests), messaging.process.duration (handler
//     calls), by the conventions;
//   - azdispatch.storage.transactions: the billable storage requests made
//     through the accounts given to [Instrumentation.ObserveAccounts], by kind
//     (azdispatch.transaction.kind), account (azdispatch.account) and, for
//     queue requests, queue; azdispatch.storage.empty_receives, the receives
//     that found nothing, which is what idle polling costs;
//   - azdispatch.listener.dequeuers (by azdispatch.dequeuer.state, busy or
//     idle), azdispatch.listener.in_flight, azdispatch.listener.poisoned and
//     azdispatch.listener.payload_memory for the listeners given to
//     [Instrumentation.ObserveListener].
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
