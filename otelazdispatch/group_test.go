package otelazdispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// A group's children's process spans say which group and child they are;
// its continuation's says the group's outcome and counts.
func TestGroupSpansCarryTheGroupAndItsOutcome(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	ctx := context.Background()
	q := memqueue.New("children", nil)
	next := memqueue.New("next", nil)
	pub, err := azdispatch.NewPublisher[order](q, nil)
	require.NoError(t, err)
	pubNext, err := azdispatch.NewPublisher[order](next, nil)
	require.NoError(t, err)
	then, err := azdispatch.ContinueWith(pubNext, order{ID: 99})
	require.NoError(t, err)
	g, err := q.PayloadStore().StartGroup(ctx, 2, then, &azdispatch.GroupOptions{ID: "g7", Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	for i := range 2 {
		_, err := pub.SendWith(ctx, order{ID: i}, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	opts := quick(inst)
	opts.Payloads.Continue = func(string) (azdispatch.Target, error) { return next, nil }
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[order]) error {
		if m.Body.ID == 1 {
			return azdispatch.Permanent(errors.New("broken"))
		}
		return nil
	}, opts)
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded+s.Poisoned == 2 })
	l, err = azdispatch.NewListener(next, func(context.Context, *azdispatch.Message[order]) error { return nil }, quick(inst))
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })

	spans := tel.byName()
	children := map[int64]bool{}
	for _, s := range spans["process children"] {
		assert.Equal(t, "g7", attr(s, "azdispatch.group.id").AsString())
		children[attr(s, "azdispatch.group.child").AsInt64()] = true
	}
	assert.Equal(t, map[int64]bool{0: true, 1: true}, children)
	require.Len(t, spans["process next"], 1)
	c := spans["process next"][0]
	assert.Equal(t, "g7", attr(c, "azdispatch.group.id").AsString())
	assert.Equal(t, "failed", attr(c, "azdispatch.group.outcome").AsString())
	assert.EqualValues(t, 1, attr(c, "azdispatch.group.succeeded").AsInt64())
	assert.EqualValues(t, 1, attr(c, "azdispatch.group.failed").AsInt64())
	assert.EqualValues(t, 2, attr(c, "azdispatch.group.size").AsInt64())
}

// ObserveGroup reports a group's children by state, n of N, read at most
// once per Every.
func TestObserveGroupReportsItsChildrenByState(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	ctx := context.Background()
	q := memqueue.New("observed", nil)
	pub, err := azdispatch.NewPublisher[order](q, nil)
	require.NoError(t, err)
	then, err := azdispatch.ContinueWith(pub, order{ID: 99})
	require.NoError(t, err)
	store := q.PayloadStore()
	g, err := store.StartGroup(ctx, 3, then, &azdispatch.GroupOptions{ID: "g8", Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	_, err = inst.ObserveGroup(store, "g8", &otelazdispatch.ReadingOptions{Every: -1})
	require.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	reg, err := inst.ObserveGroup(store, "g8", &otelazdispatch.ReadingOptions{Every: time.Nanosecond})
	require.NoError(t, err)
	defer reg.Unregister()
	children := func() map[string]int64 {
		out := map[string]int64{}
		gauge, ok := tel.metrics(t)["azdispatch.group.children"].Data.(metricdata.Gauge[int64])
		require.True(t, ok)
		for _, p := range gauge.DataPoints {
			id, _ := p.Attributes.Value("azdispatch.group.id")
			assert.Equal(t, "g8", id.AsString())
			state, _ := p.Attributes.Value("azdispatch.group.state")
			out[state.AsString()] = p.Value
		}
		return out
	}
	assert.Equal(t, map[string]int64{"succeeded": 0, "failed": 0, "pending": 3}, children())

	for i := range 2 {
		_, err := pub.SendWith(ctx, order{ID: i}, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[order]) error {
		if m.Body.ID == 1 {
			return azdispatch.Permanent(errors.New("broken"))
		}
		return nil
	}, quick())
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded+s.Poisoned == 2 })
	assert.Equal(t, map[string]int64{"succeeded": 1, "failed": 1, "pending": 1}, children())
}
