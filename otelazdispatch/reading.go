package otelazdispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// ReadingOptions configures the readings of [Instrumentation.ObserveAge]
// and [Instrumentation.ObserveGroup]. Nil, or a zero field, means the
// documented default.
type ReadingOptions struct {
	// Every is the least time between two readings: a collection within
	// Every of the last reading observes that reading again (or nothing,
	// if it failed) without asking the service. Defaults to 30 seconds.
	Every time.Duration
	// Timeout bounds one reading, within the collection's own deadline.
	// Defaults to 10 seconds.
	Timeout time.Duration
	// Logger logs failed readings, at Warn. Defaults to nil: silent (they
	// are counted all the same, as the observing method says).
	Logger *slog.Logger
}

// Defaults of [ReadingOptions].
const (
	defaultEvery   = 30 * time.Second
	defaultTimeout = 10 * time.Second
)

// withDefaults checks o (nil: the defaults) and fills in its defaults.
func (o *ReadingOptions) withDefaults() (ReadingOptions, error) {
	var r ReadingOptions
	if o != nil {
		r = *o
	}
	switch {
	case r.Every < 0:
		return r, &azdispatch.ConfigError{Field: "ReadingOptions.Every", Reason: "negative"}
	case r.Timeout < 0:
		return r, &azdispatch.ConfigError{Field: "ReadingOptions.Timeout", Reason: "negative"}
	}
	if r.Every == 0 {
		r.Every = defaultEvery
	}
	if r.Timeout == 0 {
		r.Timeout = defaultTimeout
	}
	return r, nil
}

// reading is a value read from storage at most once per every, however
// often and by however many readers the meter is collected: they share
// the last reading. A failed reading is counted and logged, and not
// tried again before every has passed.
type reading[V any] struct {
	every, timeout time.Duration
	logger         *slog.Logger // nil: silent
	what           string       // in the log: "oldest age of orders"
	get            func(ctx context.Context) (V, error)
	failures       atomic.Int64

	// mu is held through a reading, so that collections that come during
	// one wait for it and share it rather than read again.
	mu sync.Mutex
	at time.Time // when the last reading started; zero before the first
	v  V
	ok bool // the last reading succeeded
}

// read returns the latest reading, made now if the last is older than
// every; ok is false if it failed.
func (r *reading[V]) read(ctx context.Context) (v V, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < r.every {
		return r.v, r.ok
	}
	r.at = time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var zero V
	r.v, r.ok = zero, false
	got, err := r.get(ctx)
	if err != nil {
		r.failures.Add(1)
		if r.logger != nil {
			r.logger.WarnContext(ctx, "otelazdispatch: not read", "what", r.what, "err", err)
		}
		return zero, false
	}
	r.v, r.ok = got, true
	return got, true
}
