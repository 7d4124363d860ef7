package otelazdispatch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleSend makes the send span of one message (a batch is one message),
// carries its context in the message when [Options.Propagate] is set, and
// counts and times the send. It implements [azdispatch.SendMiddleware].
func (i *Instrumentation) HandleSend(ctx context.Context, s *azdispatch.Outgoing) error {
	start := time.Now()
	a := i.common("send", semconv.MessagingOperationTypeSend, trace.SpanKindProducer, s.Queue)
	spanCtx, span := i.startSpan(ctx, a, trace.SpanContext{})
	if s.Items > 0 && span.IsRecording() {
		span.SetAttributes(semconv.MessagingBatchMessageCount(s.Items))
	}
	if i.propagate {
		carrier := propagation.MapCarrier{}
		i.propagator.Inject(spanCtx, carrier)
		for k, v := range carrier {
			s.Set(k, v)
		}
	}
	err := s.Next(spanCtx)
	if err == nil && span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingMessageID(s.ID),
			semconv.MessagingMessageBodySize(s.Size),
			OffloadedKey.Bool(s.Offloaded),
		)
	}
	set := end(span, err, a)
	i.opTime.Record(ctx, seconds(start), set)
	i.sent.Add(ctx, 1, set)
	return err
}
