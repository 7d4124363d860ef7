package otelazdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// System is the messaging.system value of every span and metric of this
// package. The semantic conventions register no value for Azure Queue
// Storage, so this one is this package's own.
const System = "azure_queue_storage"

// ScopeName is the instrumentation scope of this package's tracer and meter.
const ScopeName = "github.com/azdispatch/azdispatch/otelazdispatch"

// Attributes of this package, beside the conventions' own.
const (
	DequeueCountKey    = attribute.Key("azdispatch.message.dequeue_count")
	BatchIDKey         = attribute.Key("azdispatch.batch.id")
	BatchItemKey       = attribute.Key("azdispatch.batch.item")
	GroupIDKey         = attribute.Key("azdispatch.group.id")          // a group's child's, or its continuation's
	GroupChildKey      = attribute.Key("azdispatch.group.child")       // a child's index
	GroupOutcomeKey    = attribute.Key("azdispatch.group.outcome")     // a continuation's: succeeded or failed
	GroupSucceededKey  = attribute.Key("azdispatch.group.succeeded")   // a continuation's: children succeeded
	GroupFailedKey     = attribute.Key("azdispatch.group.failed")      // a continuation's: children poisoned
	GroupSizeKey       = attribute.Key("azdispatch.group.size")        // a continuation's: children in all
	GroupStateKey      = attribute.Key("azdispatch.group.state")       // azdispatch.group.children's: succeeded, failed or pending
	OffloadedKey       = attribute.Key("azdispatch.message.offloaded") // the body went to a payload blob
	PoisonReasonKey    = attribute.Key("azdispatch.poison.reason")
	TransactionKindKey = attribute.Key("azdispatch.transaction.kind")
	AccountKey         = attribute.Key("azdispatch.account")
	DequeuerStateKey   = attribute.Key("azdispatch.dequeuer.state")
	// RetryReasonKey is why messages were retried: error, panic, timeout,
	// storage or poison (see [azdispatch.RetryCounts]).
	RetryReasonKey = attribute.Key("azdispatch.retry.reason")
)

// Options configures an [Instrumentation]. Nil, or a zero field, means the
// documented default.
type Options struct {
	// TracerProvider makes the spans. Defaults to [otel.GetTracerProvider]().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics. Defaults to [otel.GetMeterProvider]().
	MeterProvider metric.MeterProvider
	// Propagator writes the trace context into messages and reads it back.
	// Defaults to [otel.GetTextMapPropagator](), or to W3C trace context if
	// that propagates nothing (the global default until an SDK sets one).
	Propagator propagation.TextMapPropagator
	// Propagate carries the trace context in the text of every message
	// sent (see [azdispatch.Metadata]). Defaults to false: message texts stay
	// byte for byte what the codec writes (delayed ones too, with
	// [azdispatch.PublisherOptions].PlainDelays), for queues shared with readers
	// that do not know the metadata line, such as the Azure Functions queue
	// trigger. Listeners read a carried context either way.
	Propagate bool
	// ParentFromMessage makes a single message's creation context the
	// parent of its process span (besides the link), so that a trace runs
	// from the send to the handler, when the handler's context has no span
	// of its own. Defaults to false: process spans are linked, not
	// parented, as the conventions recommend. Batch items are always linked
	// only, as one item of many.
	ParentFromMessage bool
}

// Instrumentation traces and measures publishers and listeners. It is an
// [azdispatch.Middleware], an [azdispatch.StorageMiddleware] and an
// [azdispatch.SendMiddleware]: give the same one to every publisher and
// listener of the process. It is safe for concurrent use.
type Instrumentation struct {
	tracer     trace.Tracer
	meter      metric.Meter
	propagator propagation.TextMapPropagator
	propagate  bool
	parent     bool

	sent      metric.Int64Counter
	consumed  metric.Int64Counter
	opTime    metric.Float64Histogram
	procTime  metric.Float64Histogram
	waited    metric.Float64Histogram // azdispatch.message.time_in_queue
	endToEnd  metric.Float64Histogram // azdispatch.message.end_to_end
	requeued  metric.Int64Counter     // azdispatch.poison.requeued
	observers observers
	// ops caches the attributes of each operation on each queue: building
	// an attribute set per message would cost more than the rest of the
	// instrumentation together.
	ops sync.Map // opKey → *opAttrs
}

// opKey is an operation on a queue.
type opKey struct{ op, queue string }

// opAttrs are an operation's attributes, as a slice for spans and as a
// set for metrics of a successful operation.
type opAttrs struct {
	span  string // the span name: "{operation name} {queue}"
	attrs []attribute.KeyValue
	start []trace.SpanStartOption // the span's kind and attrs
	ok    metric.MeasurementOption
	// okRecord is ok as the options Record takes (see recordOpts).
	okRecord []metric.RecordOption
	// queueAttrs are messaging.system and messaging.destination.name
	// alone, for the metrics of a message rather than of an operation;
	// queue is their set, as the options Record takes: passed as
	// queue..., they cost no allocation per call.
	queueAttrs []attribute.KeyValue
	queue      []metric.RecordOption
}

// New returns an [Instrumentation]. It fails only if an instrument cannot be
// made.
func New(opts *Options) (*Instrumentation, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = otel.GetTextMapPropagator()
		if len(o.Propagator.Fields()) == 0 {
			o.Propagator = propagation.TraceContext{}
		}
	}
	i := &Instrumentation{
		tracer:     o.TracerProvider.Tracer(ScopeName),
		meter:      o.MeterProvider.Meter(ScopeName),
		propagator: o.Propagator,
		propagate:  o.Propagate,
		parent:     o.ParentFromMessage,
	}
	// Seconds, with buckets from a millisecond (an emulator's round trip)
	// to a minute (a long handler); the default buckets start at 0 and 5.
	buckets := metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	var errs [4]error
	i.sent, errs[0] = i.meter.Int64Counter("messaging.client.sent.messages",
		metric.WithUnit("{message}"), metric.WithDescription("Number of messages producer attempted to send to the broker."))
	i.consumed, errs[1] = i.meter.Int64Counter("messaging.client.consumed.messages",
		metric.WithUnit("{message}"), metric.WithDescription("Number of messages that were delivered to the application."))
	i.opTime, errs[2] = i.meter.Float64Histogram("messaging.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of messaging operation initiated by a producer or consumer client."), buckets)
	i.procTime, errs[3] = i.meter.Float64Histogram("messaging.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of processing operation."), buckets)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	if err := errors.Join(i.initMessageMetrics(), i.initRequeued()); err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	if err := i.observers.init(i.meter); err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	return i, nil
}

// creationContext is the span context a message's metadata carries; it is
// invalid when the message carries none.
func (i *Instrumentation) creationContext(meta azdispatch.Metadata) trace.SpanContext {
	if len(meta) == 0 {
		return trace.SpanContext{}
	}
	ctx := i.propagator.Extract(context.Background(), propagation.MapCarrier(meta))
	return trace.SpanContextFromContext(ctx)
}

// startSpan starts the operation's span, linked to the message's creation
// context when it has one, with the attributes every span of the operation
// shares, which a sampler sees; the others are set only on a span that
// records, so that tracing that is off (or sampled out) costs little.
func (i *Instrumentation) startSpan(ctx context.Context, a *opAttrs, created trace.SpanContext) (context.Context, trace.Span) {
	if !created.IsValid() {
		return i.tracer.Start(ctx, a.span, a.start...)
	}
	return i.tracer.Start(ctx, a.span, append(a.start[:len(a.start):len(a.start)], trace.WithLinks(trace.Link{SpanContext: created}))...)
}

// startChildOf starts a process span whose parent is the message's creation
// context (ParentFromMessage), linked to it as well.
func (i *Instrumentation) startChildOf(ctx context.Context, a *opAttrs, created trace.SpanContext) (context.Context, trace.Span) {
	return i.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, created), a.span,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(a.attrs...), trace.WithLinks(trace.Link{SpanContext: created}))
}

// common returns the attributes every span and metric of an operation on
// queue has; the slice is shared and must not be appended to in place.
func (i *Instrumentation) common(opName string, opType attribute.KeyValue, kind trace.SpanKind, queue string) *opAttrs {
	k := opKey{opName, queue}
	if a, ok := i.ops.Load(k); ok {
		return a.(*opAttrs)
	}
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String(System),
		semconv.MessagingOperationName(opName),
		opType,
		semconv.MessagingDestinationName(queue),
	}
	attrs = attrs[:len(attrs):len(attrs)]
	start := []trace.SpanStartOption{trace.WithSpanKind(kind), trace.WithAttributes(attrs...)}
	if kind != trace.SpanKindProducer {
		// The listener's goroutines carry Run's context: a span there (Run
		// called inside one) would make every message's spans its
		// children, one trace for the listener's whole life.
		start = append(start, trace.WithNewRoot())
	}
	ok := metric.WithAttributeSet(attribute.NewSet(attrs...))
	queueAttrs := []attribute.KeyValue{attrs[0], attrs[3]}
	a, _ := i.ops.LoadOrStore(k, &opAttrs{span: opName + " " + queue, attrs: attrs, start: start,
		ok: ok, okRecord: []metric.RecordOption{ok},
		queueAttrs: queueAttrs,
		queue:      []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(queueAttrs...))}})
	return a.(*opAttrs)
}

// with returns the operation's attributes and extra ones, in a new slice.
func (a *opAttrs) with(extra ...attribute.KeyValue) []attribute.KeyValue {
	return append(a.attrs[:len(a.attrs):len(a.attrs)], extra...)
}

// end records err on span and ends it; it returns the option that gives a
// metric the operation's attributes, with error.type when err is not nil.
func end(span trace.Span, err error, a *opAttrs) metric.MeasurementOption {
	if err == nil {
		span.End()
		return a.ok
	}
	kind := errorType(err)
	span.RecordError(err)
	span.SetStatus(codes.Error, kind)
	span.SetAttributes(semconv.ErrorTypeKey.String(kind))
	span.End()
	return metric.WithAttributes(a.with(semconv.ErrorTypeKey.String(kind))...)
}

// recordOpts is set, which end returned for err, as the options a
// histogram's Record takes. A successful operation's are made once: a
// variadic argument built at the call would cost an allocation per call,
// as a histogram is an interface.
func (a *opAttrs) recordOpts(err error, set metric.MeasurementOption) []metric.RecordOption {
	if err == nil {
		return a.okRecord
	}
	return []metric.RecordOption{set}
}

// errorType is a low-cardinality name for err, for error.type: the storage
// error code, or what kind of failure a handler's was.
func errorType(err error) string {
	var se *azdispatch.StorageError
	var pe *azdispatch.PanicError
	var perm *azdispatch.PermanentError
	switch {
	case errors.As(err, &se) && se.Code != "":
		return se.Code
	case errors.As(err, &se) && se.StatusCode == 0:
		return "transport" // no response: a timeout, a refused or broken connection
	case errors.As(err, &se):
		return fmt.Sprint(se.StatusCode)
	case errors.As(err, &pe):
		return "panic"
	case errors.As(err, &perm):
		return "permanent"
	case errors.Is(err, azdispatch.ErrHandlerTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, azdispatch.ErrDrainTimeout):
		return "canceled"
	case errors.Is(err, azdispatch.ErrOwnershipLost):
		return "ownership_lost"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// seconds since start, for a duration histogram.
func seconds(start time.Time) float64 { return time.Since(start).Seconds() }
