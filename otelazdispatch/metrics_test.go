package otelazdispatch_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// The metrics of a handler call, time in queue and end-to-end time
// included, allocate nothing per call with the SDK's meter: their
// attribute sets and options are made once per queue. The one allocation
// left is the span's context (here a no-op tracer's).
func TestHandleCallMetricsAllocateNothing(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelazdispatch.New(&otelazdispatch.Options{TracerProvider: noop.NewTracerProvider(), MeterProvider: mp})
	require.NoError(t, err)
	q := memqueue.New("allocs", nil)
	_, err = q.Send(context.Background(), `{"id":1}`, nil)
	require.NoError(t, err)
	allocs := -1.0
	// Call.Next may be called again after it returned: the probe calls
	// the instrumentation over the same call many times.
	probe := azdispatch.MiddlewareFunc(func(ctx context.Context, c *azdispatch.Call) error {
		if c.DequeueCount != 1 || c.InsertedAt.IsZero() {
			return errors.New("not a first delivery with an insertion time: the message metrics would not be recorded")
		}
		allocs = testing.AllocsPerRun(500, func() { _ = inst.HandleCall(ctx, c) })
		return nil
	})
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[order]) error { return nil }, quick(probe))
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })
	assert.LessOrEqual(t, allocs, 1.0)
	assert.GreaterOrEqual(t, allocs, 0.0, "the probe ran")
}

// Time in queue is recorded on first deliveries only, by the service's
// clock; end-to-end on every call, failed ones with error.type; the
// listener's retries by reason and recent time in queue are observed.
func TestMessageTimes(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	// The service's clock an hour behind the listener's: time in queue
	// does not see it, end-to-end does.
	clock := memqueue.NewManualClock(time.Now().Add(-time.Hour).Truncate(time.Second))
	q := memqueue.New("times", &memqueue.Options{Clock: clock})
	ctx := context.Background()
	for _, text := range []string{`{"id":1}`, `{"id":2}`} {
		_, err := q.Send(ctx, text, nil)
		require.NoError(t, err)
	}
	clock.Advance(90 * time.Second)
	var failed atomic.Bool
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[order]) error {
		if m.Body.ID == 2 && failed.CompareAndSwap(false, true) {
			return errors.New("first try fails")
		}
		return nil
	}, quick(inst))
	require.NoError(t, err)
	reg, err := inst.ObserveListener("times", l)
	require.NoError(t, err)
	defer func() { assert.NoError(t, reg.Unregister()) }()
	runUntil(t, l, func(s azdispatch.State) bool {
		if s.Received >= 2 && s.Failed == 1 {
			clock.Advance(2 * time.Second) // past the retry delay
		}
		return s.Succeeded == 2
	})

	m := tel.metrics(t)
	queueOnly := attribute.NewSet(attribute.String("messaging.system", otelazdispatch.System), attribute.String("messaging.destination.name", "times"))
	waited := m["azdispatch.message.time_in_queue"].Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, waited, 1)
	assert.True(t, waited[0].Attributes.Equals(&queueOnly), "attributes: %v", waited[0].Attributes.ToSlice())
	assert.EqualValues(t, 2, waited[0].Count, "first deliveries only: the retry is not counted")
	assert.InDelta(t, 180, waited[0].Sum, 1e-9, "90 s each, on the service's clock")
	assert.EqualValues(t, 2, waited[0].BucketCounts[7], "in (60, 120]: %v", waited[0].BucketCounts)
	assert.Equal(t, "s", m["azdispatch.message.time_in_queue"].Unit)

	var ok, failedCalls uint64
	for _, dp := range m["azdispatch.message.end_to_end"].Data.(metricdata.Histogram[float64]).DataPoints {
		assert.GreaterOrEqual(t, dp.Sum, float64(dp.Count)*3600, "from the insertion, an hour behind, to the call's end")
		if v, has := dp.Attributes.Value("error.type"); has {
			assert.Equal(t, "_OTHER", v.AsString())
			failedCalls += dp.Count
			continue
		}
		assert.True(t, dp.Attributes.Equals(&queueOnly), "attributes: %v", dp.Attributes.ToSlice())
		ok += dp.Count
	}
	assert.EqualValues(t, 2, ok)
	assert.EqualValues(t, 1, failedCalls)

	reasons := map[string]int64{}
	for _, dp := range m["azdispatch.listener.retries"].Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value("azdispatch.retry.reason")
		reasons[v.AsString()] += dp.Value
	}
	assert.Equal(t, map[string]int64{"error": 1, "panic": 0, "timeout": 0, "storage": 0, "poison": 0}, reasons)
	assert.EqualValues(t, 0, sumInt(m["azdispatch.listener.rehidden"]))
	assert.Contains(t, m, "azdispatch.listener.wanted_dequeuers")
	p99, ok99 := gauge(m["azdispatch.listener.time_in_queue.p99"], "times")
	require.True(t, ok99, "observed while first deliveries are recent")
	assert.InDelta(t, 90, p99, 1e-9)
}

// gauge is the value of a float gauge's point for queue.
func gauge(m metricdata.Metrics, queue string) (float64, bool) {
	g, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		return 0, false
	}
	for _, dp := range g.DataPoints {
		if v, _ := dp.Attributes.Value("messaging.destination.name"); v.AsString() == queue {
			return dp.Value, true
		}
	}
	return 0, false
}

// collectFrom collects r's metrics, by name.
func collectFrom(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// The oldest age is read at most once per Every, however many readers
// collect and however often: one peek serves them all.
func TestObserveAgeReadsAtMostOncePerEvery(t *testing.T) {
	readers := []*sdkmetric.ManualReader{sdkmetric.NewManualReader(), sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(readers[0]), sdkmetric.WithReader(readers[1]))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelazdispatch.New(&otelazdispatch.Options{MeterProvider: mp})
	require.NoError(t, err)
	clock := memqueue.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New("aged", &memqueue.Options{Clock: clock})
	_, err = q.Send(context.Background(), `{"id":1}`, nil)
	require.NoError(t, err)
	clock.Advance(90 * time.Second)

	reg, err := inst.ObserveAge(q, nil) // Every defaults to 30 s
	require.NoError(t, err)
	assert.Zero(t, q.Transactions().Other, "nothing is read before a collection asks")
	for range 2 {
		for _, r := range readers {
			m := collectFrom(t, r)
			age, ok := gauge(m["azdispatch.queue.oldest_age"], "aged")
			require.True(t, ok)
			assert.InDelta(t, 90, age, 1e-9)
			assert.Equal(t, "s", m["azdispatch.queue.oldest_age"].Unit)
		}
		clock.Advance(time.Minute) // the service's clock; Every runs on the local one
	}
	assert.EqualValues(t, 1, q.Transactions().Other, "four collections within Every: one peek")
	require.NoError(t, reg.Unregister())

	reg, err = inst.ObserveAge(q, &otelazdispatch.ReadingOptions{Every: time.Nanosecond})
	require.NoError(t, err)
	defer func() { assert.NoError(t, reg.Unregister()) }()
	age, ok := gauge(collectFrom(t, readers[0])["azdispatch.queue.oldest_age"], "aged")
	require.True(t, ok)
	assert.InDelta(t, 210, age, 1e-9, "read again once Every has passed")
	assert.EqualValues(t, 2, q.Transactions().Other)
}

// A failed reading observes nothing, is counted and logged, and fails
// nothing else.
func TestObserveAgeFailureObservesNothing(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	var down atomic.Bool
	down.Store(true)
	q := memqueue.New("unreadable", &memqueue.Options{Intercept: func(context.Context, string, azdispatch.Op) error {
		if down.Load() {
			return errors.New("storage unreachable")
		}
		return nil
	}})
	var logs bytes.Buffer
	reg, err := inst.ObserveAge(q, &otelazdispatch.ReadingOptions{Every: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer func() { assert.NoError(t, reg.Unregister()) }()

	m := tel.metrics(t)
	_, ok := gauge(m["azdispatch.queue.oldest_age"], "unreadable")
	assert.False(t, ok, "a failed reading observes nothing")
	assert.EqualValues(t, 1, sumInt(m["azdispatch.queue.oldest_age_failures"]))
	assert.Contains(t, logs.String(), "storage unreachable")

	down.Store(false)
	m = tel.metrics(t)
	age, ok := gauge(m["azdispatch.queue.oldest_age"], "unreadable")
	assert.True(t, ok)
	assert.Zero(t, age, "an empty queue is 0 s old")
	assert.EqualValues(t, 1, sumInt(m["azdispatch.queue.oldest_age_failures"]))
}

func TestObserveAgeRejects(t *testing.T) {
	inst, err := otelazdispatch.New(nil)
	require.NoError(t, err)
	q := memqueue.New("rejects", nil)
	_, err = inst.ObserveAge(struct{ azdispatch.Source }{q}, nil)
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig, "a source that cannot peek")
	_, err = inst.ObserveAge(q, &otelazdispatch.ReadingOptions{Every: -time.Second})
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
	assert.ErrorContains(t, err, "ReadingOptions.Every")
}

func TestCountRequeue(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	inst.CountRequeue(context.Background(), "orders", azdispatch.RequeueResult{Moved: 2, Skipped: 5, Invalid: 1})
	inst.CountRequeue(context.Background(), "orders", azdispatch.RequeueResult{Moved: 1})
	m := tel.metrics(t)
	assert.EqualValues(t, 3, sumInt(m["azdispatch.poison.requeued"]))
	dp := m["azdispatch.poison.requeued"].Data.(metricdata.Sum[int64]).DataPoints
	require.Len(t, dp, 1)
	v, _ := dp[0].Attributes.Value("messaging.destination.name")
	assert.Equal(t, "orders", v.AsString())
}
