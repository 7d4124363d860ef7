package otelazdispatch

import (
	"context"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleCall makes the process span of one handler call and records its
// duration. It implements [azdispatch.Middleware].
func (i *Instrumentation) HandleCall(ctx context.Context, c *azdispatch.Call) error {
	start := time.Now()
	created := i.creationContext(c.Metadata)
	a := i.common("process", semconv.MessagingOperationTypeProcess, trace.SpanKindConsumer, c.Queue)
	var spanCtx context.Context
	var span trace.Span
	if i.parent && c.BatchID == "" && created.IsValid() {
		spanCtx, span = i.startChildOf(ctx, a, created)
	} else {
		spanCtx, span = i.startSpan(ctx, a, created)
	}
	if span.IsRecording() {
		span.SetAttributes(semconv.MessagingMessageID(c.ID), semconv.MessagingMessageBodySize(c.Size), DequeueCountKey.Int64(c.DequeueCount))
		if c.BatchID != "" {
			span.SetAttributes(BatchIDKey.String(c.BatchID), BatchItemKey.Int(c.Item))
		}
	}
	err := c.Next(spanCtx)
	i.procTime.Record(ctx, seconds(start), end(span, err, a))
	return err
}
