package otelazdispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// HandleStorage makes the receive and settle spans of a listener's
// storage requests, records their durations, and counts the messages
// received. It implements [azdispatch.StorageMiddleware].
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
	a := i.common("receive", semconv.MessagingOperationTypeReceive, trace.SpanKindClient, op.Queue)
	spanCtx, span := i.startSpan(ctx, a, trace.SpanContext{})
	err := op.Next(spanCtx)
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingBatchMessageCount(len(op.Received)))
		for _, d := range op.Received {
			// Behind a due line too: a message sent for later carries its
			// metadata after it.
			if sc := i.creationContext(azdispatch.DescribeText(d.Text).Metadata); sc.IsValid() {
				span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(d.ID)}})
			}
		}
	}
	set := end(span, err, a)
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
	a := i.common(settleName(op.Kind), semconv.MessagingOperationTypeSettle, trace.SpanKindClient, op.Queue)
	created := i.creationContext(azdispatch.DescribeText(d.Text).Metadata)
	spanCtx, span := i.startSpan(ctx, a, created)
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageID(d.ID), DequeueCountKey.Int64(d.DequeueCount))
		if op.Kind == azdispatch.OpSend {
			// Handler error text may hold payload data: a bounded prefix.
			span.SetAttributes(PoisonReasonKey.String(xmltext.TruncateUTF8(op.Reason, 256)))
		}
		if op.Item >= 0 {
			span.SetAttributes(BatchItemKey.Int(op.Item))
		}
	}
	err := op.Next(spanCtx)
	i.opTime.Record(ctx, seconds(start), a.recordOpts(err, end(span, err, a))...)
	return err
}

// settleName names a settling request's span by what it does for the
// message: a delete, a release (an update of its visibility) or a poison
// move (a send to the poison queue).
func settleName(op azdispatch.Op) string {
	switch op {
	case azdispatch.OpUpdate:
		return "release"
	case azdispatch.OpSend:
		return "poison"
	}
	return string(op)
}
