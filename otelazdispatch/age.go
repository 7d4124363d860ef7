package otelazdispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/azdispatch/azdispatch"
)

// AgeOptions configures [Instrumentation.ObserveAge]. Nil, or a zero field,
// means the documented default.
type AgeOptions struct {
	// Every is the least time between two readings: a collection within
	// Every of the last reading observes that reading again (or nothing,
	// if it failed) without asking the service. Defaults to 30 seconds.
	Every time.Duration
	// Timeout bounds one reading, within the collection's own deadline.
	// Defaults to 10 seconds.
	Timeout time.Duration
	// Logger logs failed readings, at Warn. Defaults to nil: silent (they
	// are counted all the same, in azdispatch.queue.oldest_age_failures).
	Logger *slog.Logger
}

// Defaults of [AgeOptions].
const (
	defaultAgeEvery   = 30 * time.Second
	defaultAgeTimeout = 10 * time.Second
)

// ObserveAge reports the age of the oldest of the front messages of src, read with
// [azdispatch.OldestAge], as azdispatch.queue.oldest_age (seconds, on the
// service's clock), with messaging.destination.name set to src's name. It
// is an approximation of the oldest message's age (see OldestAge): it
// sees only visible messages, and the service keeps no strict order.
//
// Each reading costs one billable Peek Messages request per queue (per
// shard of an [azdispatch.ShardedQueue]), so readings are cached: at most
// one per [AgeOptions.Every], however often and by however many readers
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
func (i *Instrumentation) ObserveAge(src azdispatch.Source, opts *AgeOptions) (metric.Registration, error) {
	var o AgeOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Every < 0:
		return nil, &azdispatch.ConfigError{Field: "AgeOptions.Every", Reason: "negative"}
	case o.Timeout < 0:
		return nil, &azdispatch.ConfigError{Field: "AgeOptions.Timeout", Reason: "negative"}
	}
	if azdispatch.CapabilitiesOf(src).Peek == nil {
		return nil, &azdispatch.ConfigError{Field: "source", Reason: fmt.Sprintf("%q cannot peek: ObserveAge needs a Peek method", src.Name())}
	}
	if o.Every == 0 {
		o.Every = defaultAgeEvery
	}
	if o.Timeout == 0 {
		o.Timeout = defaultAgeTimeout
	}
	r := &ageReader{src: src, opts: o}
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

// ageReader reads a source's oldest age at most once per opts.Every.
type ageReader struct {
	src      azdispatch.Source
	opts     AgeOptions
	failures atomic.Int64

	// mu is held through a reading, so that collections that come during
	// one wait for it and share it rather than read again.
	mu  sync.Mutex
	at  time.Time // when the last reading started; zero before the first
	age time.Duration
	ok  bool // the last reading succeeded
}

// read returns the latest reading, made now if the last is older than
// Every; ok is false if it failed.
func (r *ageReader) read(ctx context.Context) (age time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < r.opts.Every {
		return r.age, r.ok
	}
	r.at = time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	r.age, r.ok = 0, false
	age, err := azdispatch.OldestAge(ctx, r.src)
	if err != nil {
		r.failures.Add(1)
		if r.opts.Logger != nil {
			r.opts.Logger.WarnContext(ctx, "otelazdispatch: oldest age not read", "queue", r.src.Name(), "err", err)
		}
		return 0, false
	}
	r.age, r.ok = age, true
	return age, true
}
