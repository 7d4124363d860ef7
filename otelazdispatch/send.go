package otelazdispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleSend makes the send span of one message (a batch is one message),
// carries its context in the message when Options.Propagate is set, and
// counts and times the send. It implements azdispatch.SendMiddleware.
func (i *Instrumentation) HandleSend(ctx context.Context, s *azdispatch.Outgoing) error {
	start := time.Now()
	attrs := common("send", semconv.MessagingOperationTypeSend, s.Queue)
	spanAttrs := attrs[:len(attrs):len(attrs)]
	if s.Items > 0 {
		spanAttrs = append(spanAttrs, semconv.MessagingBatchMessageCount(s.Items))
	}
	spanCtx, span := i.tracer.Start(ctx, "send "+s.Queue,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(start),
		trace.WithAttributes(spanAttrs...))
	if i.propagate {
		carrier := propagation.MapCarrier{}
		i.propagator.Inject(spanCtx, carrier)
		for k, v := range carrier {
			s.Set(k, v)
		}
	}
	err := s.Next(spanCtx)
	if err == nil {
		span.SetAttributes(
			semconv.MessagingMessageID(s.ID),
			semconv.MessagingMessageBodySize(s.Size),
			OffloadedKey.Bool(s.Offloaded),
		)
	}
	attrs = end(span, err, attrs)
	set := metric.WithAttributes(attrs...)
	i.opTime.Record(ctx, seconds(start), set)
	i.sent.Add(ctx, 1, set)
	return err
}
