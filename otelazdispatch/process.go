package otelazdispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleCall makes the process span of one handler call and records its
// duration. It implements azdispatch.Middleware.
func (i *Instrumentation) HandleCall(ctx context.Context, c *azdispatch.Call) error {
	start := time.Now()
	created := i.creationContext(c.Metadata)
	attrs := common("process", semconv.MessagingOperationTypeProcess, c.Queue)
	spanCtx := ctx
	if i.parent && c.BatchID == "" && created.IsValid() && !trace.SpanContextFromContext(ctx).IsValid() {
		spanCtx = trace.ContextWithRemoteSpanContext(ctx, created)
	}
	spanAttrs := append(attrs[:len(attrs):len(attrs)],
		semconv.MessagingMessageID(c.ID),
		semconv.MessagingMessageBodySize(c.Size),
		DequeueCountKey.Int64(c.DequeueCount),
	)
	if c.BatchID != "" {
		spanAttrs = append(spanAttrs, BatchIDKey.String(c.BatchID), BatchItemKey.Int(c.Item))
	}
	spanCtx, span := i.tracer.Start(spanCtx, "process "+c.Queue,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(start),
		trace.WithLinks(linkTo(created)...),
		trace.WithAttributes(spanAttrs...))
	err := c.Next(spanCtx)
	attrs = end(span, err, attrs)
	i.procTime.Record(ctx, seconds(start), metric.WithAttributes(attrs...))
	return err
}
