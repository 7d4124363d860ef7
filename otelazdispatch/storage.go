package otelazdispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleStorage makes the receive and settle spans of a listener's
// storage requests, records their durations, and counts the messages
// received. It implements azdispatch.StorageMiddleware.
func (i *Instrumentation) HandleStorage(ctx context.Context, op *azdispatch.StorageOp) error {
	if op.Kind == azdispatch.OpReceive {
		return i.receive(ctx, op)
	}
	return i.settle(ctx, op)
}

// receive traces one receive request: a span linked to the creation context
// of each message it brought.
func (i *Instrumentation) receive(ctx context.Context, op *azdispatch.StorageOp) error {
	start := time.Now()
	attrs := common("receive", semconv.MessagingOperationTypeReceive, op.Queue)
	spanCtx, span := i.tracer.Start(ctx, "receive "+op.Queue,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start),
		trace.WithAttributes(attrs...))
	err := op.Next(spanCtx)
	span.SetAttributes(semconv.MessagingBatchMessageCount(len(op.Received)))
	for _, d := range op.Received {
		meta, _, perr := azdispatch.ParseMetadata(d.Text)
		if perr != nil {
			continue // the listener poisons it; nothing to link to
		}
		if sc := i.creationContext(meta); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(d.ID)}})
		}
	}
	attrs = end(span, err, attrs)
	set := metric.WithAttributes(attrs...)
	i.opTime.Record(ctx, seconds(start), set)
	if n := len(op.Received); n > 0 {
		i.consumed.Add(ctx, int64(n), set)
	}
	return err
}

// settle traces a delete, a release or a move to the poison queue.
func (i *Instrumentation) settle(ctx context.Context, op *azdispatch.StorageOp) error {
	start := time.Now()
	d := op.Message
	attrs := common(op.Kind.String(), semconv.MessagingOperationTypeSettle, op.Queue)
	spanAttrs := append(attrs[:len(attrs):len(attrs)],
		semconv.MessagingMessageID(d.ID),
		DequeueCountKey.Int64(d.DequeueCount),
	)
	if op.Item >= 0 {
		spanAttrs = append(spanAttrs, BatchItemKey.Int(op.Item))
	}
	var links []trace.Link
	if meta, _, err := azdispatch.ParseMetadata(d.Text); err == nil {
		links = linkTo(i.creationContext(meta))
	}
	spanCtx, span := i.tracer.Start(ctx, "settle "+op.Queue,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start),
		trace.WithLinks(links...),
		trace.WithAttributes(spanAttrs...))
	if op.Kind == azdispatch.OpPoison {
		span.SetAttributes(attribute.String("azdispatch.poison.reason", op.Reason))
	}
	err := op.Next(spanCtx)
	attrs = end(span, err, attrs)
	i.opTime.Record(ctx, seconds(start), metric.WithAttributes(attrs...))
	return err
}
