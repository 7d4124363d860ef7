package otelazdispatch

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/azdispatch/azdispatch"
)

// initRequeued makes the counter of [Instrumentation.CountRequeue].
func (i *Instrumentation) initRequeued() error {
	var err error
	i.requeued, err = i.meter.Int64Counter("azdispatch.poison.requeued", metric.WithUnit("{message}"),
		metric.WithDescription("Messages moved back from a poison queue to be tried again."))
	return err
}

// CountRequeue adds the messages that [azdispatch.Requeue] (or
// [azdispatch.ShardedQueue.Requeue]) moved, r.Moved, to
// azdispatch.poison.requeued, with messaging.destination.name set to queue:
// the queue they were moved back to. Call it with the result of every
// requeue, whether or not it failed part way (what it moved before the
// failure counts too).
//
// A requeue happens in whatever process calls Requeue, typically an
// operator's command line tool rather than a listener, so no listener can
// see it: the process that requeues records it, through an
// [Instrumentation] whose meter that process exports.
func (i *Instrumentation) CountRequeue(ctx context.Context, queue string, r azdispatch.RequeueResult) {
	i.requeued.Add(ctx, int64(r.Moved), metric.WithAttributes(semconv.MessagingSystemKey.String(System), semconv.MessagingDestinationName(queue)))
}
