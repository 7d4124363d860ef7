package otelazdispatch

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
)

// groupAttributes says on a span which group a message is a child of, or
// the outcome of the group a continuation completes.
func groupAttributes(span trace.Span, m azdispatch.MessageInfo) {
	if id, child, ok := azdispatch.GroupChildOf(m); ok {
		span.SetAttributes(GroupIDKey.String(id), GroupChildKey.Int(child))
	}
	if o, ok := azdispatch.GroupOutcomeOf(m); ok {
		span.SetAttributes(GroupIDKey.String(o.ID), GroupOutcomeKey.String(o.Outcome), GroupSucceededKey.Int(o.Succeeded),
			GroupFailedKey.Int(o.Failed), GroupSizeKey.Int(o.Size))
	}
}

// ObserveGroup reports the progress of group id, read from store with
// [azdispatch.PayloadStore.GroupStatus], as azdispatch.group.children (a
// gauge of children by azdispatch.group.state: succeeded, failed, pending;
// n of N), with azdispatch.group.id set; and the readings that failed as
// azdispatch.group.read_failures. Why children failed is on their spans
// (azdispatch.poison.reason) and in the status itself.
//
// Each reading costs one blob read, and one more per 64 children beyond the
// first 64, so readings are cached: at most one per [ReadingOptions.Every]
// (30 s by default), however often the meter is collected. Observe a group
// while it runs, from one process, and unregister the result once it is
// complete.
func (i *Instrumentation) ObserveGroup(store *azdispatch.PayloadStore, id string, opts *ReadingOptions) (metric.Registration, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if store == nil {
		return nil, &azdispatch.ConfigError{Field: "store", Reason: "nil"}
	}
	r := &reading[azdispatch.GroupStatus]{every: o.Every, timeout: o.Timeout, logger: o.Logger, what: "group " + id,
		get: func(ctx context.Context) (azdispatch.GroupStatus, error) { return store.GroupStatus(ctx, id) }}
	obs := &i.observers
	group := GroupIDKey.String(id)
	reg, err := i.meter.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		if st, ok := r.read(ctx); ok {
			for _, c := range []struct {
				state string
				n     int
			}{{"succeeded", st.Succeeded}, {"failed", st.Failed}, {"pending", st.Pending}} {
				ob.ObserveInt64(obs.groupChildren, int64(c.n), metric.WithAttributes(group, GroupStateKey.String(c.state)))
			}
		}
		ob.ObserveInt64(obs.groupFailures, r.failures.Load(), metric.WithAttributes(group))
		return nil
	}, obs.groupChildren, obs.groupFailures)
	if err != nil {
		return nil, fmt.Errorf("otelazdispatch: %w", err)
	}
	return reg, nil
}
