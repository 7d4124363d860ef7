package otelazdispatch

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/azdispatch/azdispatch"
)

// ObserveAge reports the age of the oldest of the front messages of src, read with
// [azdispatch.OldestAge], as azdispatch.queue.oldest_age (seconds, on the
// service's clock), with messaging.destination.name set to src's name. It
// is an approximation of the oldest message's age (see OldestAge): it
// sees only visible messages, and the service keeps no strict order.
//
// Each reading costs one billable Peek Messages request per queue (per
// shard of an [azdispatch.ShardedQueue]), so readings are cached: at most
// one per [ReadingOptions.Every], however often and by however many readers
// the meter is collected, which share it. Nothing is read until a
// collection asks. A reading that fails observes nothing (it is logged
// and counted in azdispatch.queue.oldest_age_failures) and is not retried
// before Every has passed; it never fails the collection.
//
// A queue's age is the same seen from every process: call ObserveAge in
// one instance of a service (or a monitor of its own), not in every
// listener, or each one pays for the same peeks. Unregister the result to
// stop.
//
// It fails if src cannot peek, or if opts has a negative field.
func (i *Instrumentation) ObserveAge(src azdispatch.Source, opts *ReadingOptions) (metric.Registration, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if azdispatch.CapabilitiesOf(src).Peek == nil {
		return nil, &azdispatch.ConfigError{Field: "source", Reason: fmt.Sprintf("%q cannot peek: ObserveAge needs a Peek method", src.Name())}
	}
	r := &reading[time.Duration]{every: o.Every, timeout: o.Timeout, logger: o.Logger, what: "oldest age of " + src.Name(),
		get: func(ctx context.Context) (time.Duration, error) { return azdispatch.OldestAge(ctx, src) }}
	dest := metric.WithAttributes(semconv.MessagingSystemKey.String(System), semconv.MessagingDestinationName(src.Name()))
	obs := &i.observers
	reg, err := i.meter.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		if age, ok := r.read(ctx); ok {
			ob.ObserveFloat64(obs.oldestAge, age.Seconds(), dest)
		}
		ob.ObserveInt64(obs.ageFailures, r.failures.Load(), dest)
		return nil
	}, obs.oldestAge, obs.ageFailures)
	if err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	return reg, nil
}
