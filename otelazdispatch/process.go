package otelazdispatch

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// HandleCall makes the process span of one handler call and records its
// duration, and the message's time in queue and end-to-end time (see the
// package documentation's Metrics). It implements [azdispatch.Middleware].
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
		groupAttributes(span, c.MessageInfo)
	}
	err := c.Next(spanCtx)
	returned := time.Now()
	i.procTime.Record(ctx, returned.Sub(start).Seconds(), a.recordOpts(err, end(span, err, a))...)
	i.recordMessageTimes(ctx, c, a, returned, err)
	return err
}

// messageBuckets are the bucket boundaries, in seconds, of the message
// times: from an instant to a day. Both come from the service's times,
// which are whole seconds, so buckets under a second would tell nothing.
var messageBuckets = metric.WithExplicitBucketBoundaries(0, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)

// initMessageMetrics makes the histograms of [Instrumentation.recordMessageTimes].
func (i *Instrumentation) initMessageMetrics() error {
	var errs [2]error
	i.waited, errs[0] = i.meter.Float64Histogram("azdispatch.message.time_in_queue", metric.WithUnit("s"),
		metric.WithDescription("Time messages waited in their queue before their first delivery, on the service's clock, in whole seconds."),
		messageBuckets)
	i.endToEnd, errs[1] = i.meter.Float64Histogram("azdispatch.message.end_to_end", metric.WithUnit("s"),
		metric.WithDescription("Time from a message's insertion, on the service's clock, to the end of a handler call for it, on the listener's."),
		messageBuckets)
	return errors.Join(errs[:]...)
}

// recordMessageTimes records a handler call's time in queue and end-to-end
// time, with the queue's attributes (and error.type on end_to_end when the
// call failed). A source that gives no insertion time gives neither.
//
// Time in queue is recorded on a message's first delivery only: a retry
// waits by design (its retry delay), and counting that wait would make a
// queue that keeps up look behind whenever handlers fail.
func (i *Instrumentation) recordMessageTimes(ctx context.Context, c *azdispatch.Call, a *opAttrs, returned time.Time, err error) {
	if c.InsertedAt.IsZero() {
		return
	}
	if c.DequeueCount == 1 {
		i.waited.Record(ctx, c.TimeInQueue.Seconds(), a.queue...)
	}
	// The listener's clock less the service's: skew between them enters,
	// and a clock behind the service's could make it negative.
	e2e := max(returned.Sub(c.InsertedAt).Seconds(), 0)
	if err == nil {
		i.endToEnd.Record(ctx, e2e, a.queue...)
		return
	}
	i.endToEnd.Record(ctx, e2e, metric.WithAttributes(append(slices.Clip(a.queueAttrs), semconv.ErrorTypeKey.String(errorType(err)))...))
}
