package otelazdispatch

import (
	"context"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleBatch makes the span of one call of a batch handler (see
// [azdispatch.NewBatchListener]): a process span with the call's message
// count, linked to the process span of each of its messages, which
// HandleCall made and which is linked to the message's creation context in
// turn, as the OpenTelemetry messaging conventions have a batch's process
// span link its messages. It implements [azdispatch.BatchMiddleware].
func (i *Instrumentation) HandleBatch(ctx context.Context, b *azdispatch.BatchCall) error {
	a := i.common("process", semconv.MessagingOperationTypeProcess, trace.SpanKindConsumer, b.Source)
	links := make([]trace.Link, 0, len(b.Contexts))
	for _, c := range b.Contexts {
		if sc := trace.SpanContextFromContext(c); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	opts := append(a.start[:len(a.start):len(a.start)], trace.WithLinks(links...),
		trace.WithAttributes(semconv.MessagingBatchMessageCount(len(b.Messages))))
	spanCtx, span := i.tracer.Start(ctx, a.span, opts...)
	err := b.Next(spanCtx)
	end(span, err, a)
	return err
}
