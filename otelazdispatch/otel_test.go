package otelazdispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type order struct {
	ID int `json:"id"`
}

// telemetry is an SDK that keeps what it records in memory.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t *testing.T) *telemetry {
	spans := tracetest.NewInMemoryExporter()
	tel := &telemetry{spans: spans, tp: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)), reader: sdkmetric.NewManualReader()}
	tel.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() {
		_ = tel.tp.Shutdown(context.Background())
		_ = tel.mp.Shutdown(context.Background())
	})
	return tel
}

func (tel *telemetry) instrumentation(t *testing.T, opts otelazdispatch.Options) *otelazdispatch.Instrumentation {
	opts.TracerProvider, opts.MeterProvider = tel.tp, tel.mp
	inst, err := otelazdispatch.New(&opts)
	require.NoError(t, err)
	return inst
}

// byName groups the finished spans by name.
func (tel *telemetry) byName() map[string][]tracetest.SpanStub {
	out := map[string][]tracetest.SpanStub{}
	for _, s := range tel.spans.GetSpans() {
		out[s.Name] = append(out[s.Name], s)
	}
	return out
}

// metrics collects the metrics, by name.
func (tel *telemetry) metrics(t *testing.T) map[string]metricdata.Metrics {
	var rm metricdata.ResourceMetrics
	require.NoError(t, tel.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// runUntil runs l until done holds, then stops it.
func runUntil[T any](t *testing.T, l *azdispatch.Listener[T], done func(azdispatch.State) bool) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { assert.NoError(t, l.Run(ctx)) })
	assert.Eventually(t, func() bool { return done(l.State()) }, 20*time.Second, 5*time.Millisecond)
	stop()
	run.Wait()
}

// sendAndHandleOne sends one order to q through a publisher instrumented
// with inst, and handles it with a listener instrumented likewise.
func sendAndHandleOne(t *testing.T, inst *otelazdispatch.Instrumentation, q azdispatch.Shard) {
	t.Helper()
	pub, err := azdispatch.NewPublisher[order](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{inst}})
	require.NoError(t, err)
	_, err = pub.Send(context.Background(), order{ID: 1})
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[order]) error { return nil }, quick(inst))
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })
}

func quick(mw ...azdispatch.Middleware) *azdispatch.ListenerOptions {
	return &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond),
		},
		Retry:      func(int64) time.Duration { return time.Second },
		Middleware: mw,
	}
}

func TestEveryProcessSpanIsLinkedToItsSend(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{Propagate: true})
	ctx := context.Background()
	q := memqueue.New("traced", nil)
	pub, err := azdispatch.NewPublisher[order](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{inst}})
	require.NoError(t, err)
	ids := map[string]bool{}
	for i := range 3 {
		sent, err := pub.Send(ctx, order{ID: i})
		require.NoError(t, err)
		ids[sent.ID] = true
	}
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[order]) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return errors.New("the handler's context has no span")
		}
		if m.Body.ID == 2 {
			return azdispatch.Permanent(errors.New("refused"))
		}
		return nil
	}, quick(inst))
	require.NoError(t, err)
	reg, err := inst.ObserveListener("traced", l)
	require.NoError(t, err)
	defer func() { assert.NoError(t, reg.Unregister()) }()
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 2 && s.Poisoned == 1 })

	spans := tel.byName()
	sends := spans["send traced"]
	require.Len(t, sends, 3)
	sendOf := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range sends {
		assert.Equal(t, trace.SpanKindProducer, s.SpanKind)
		assert.Equal(t, otelazdispatch.System, attr(s, "messaging.system").AsString())
		assert.True(t, ids[attr(s, "messaging.message.id").AsString()], "send span carries the message ID")
		sendOf[s.SpanContext.SpanID()] = s
	}
	process := spans["process traced"]
	require.Len(t, process, 3)
	for _, p := range process {
		assert.Equal(t, trace.SpanKindConsumer, p.SpanKind)
		require.Len(t, p.Links, 1, "a process span links to its message's creation context")
		send, ok := sendOf[p.Links[0].SpanContext.SpanID()]
		require.True(t, ok, "the link points at a send span")
		assert.Equal(t, attr(send, "messaging.message.id"), attr(p, "messaging.message.id"))
		assert.EqualValues(t, 1, attr(p, "azdispatch.message.dequeue_count").AsInt64())
		assert.EqualValues(t, len(`{"id":0}`), attr(p, "messaging.message.body.size").AsInt64())
		assert.False(t, p.Parent.IsValid(), "linked, not parented, by default")
	}
	var receivedLinks int
	for _, r := range spans["receive traced"] {
		assert.Equal(t, trace.SpanKindClient, r.SpanKind)
		receivedLinks += len(r.Links)
	}
	assert.Equal(t, 3, receivedLinks, "the receive spans link to every message they brought")
	ops := map[string]int{}
	for _, s := range settleSpans(tel) {
		assert.Equal(t, trace.SpanKindClient, s.SpanKind)
		assert.Len(t, s.Links, 1)
		ops[attr(s, "messaging.operation.name").AsString()]++
	}
	assert.Equal(t, map[string]int{"delete": 3, "poison": 1}, ops, "two handled and deleted; one copied to the poison queue, then deleted")

	m := tel.metrics(t)
	for _, name := range []string{"messaging.client.sent.messages", "messaging.client.consumed.messages", "messaging.process.duration",
		"messaging.client.operation.duration", "azdispatch.listener.dequeuers", "azdispatch.listener.in_flight", "azdispatch.listener.poisoned"} {
		assert.Contains(t, m, name)
	}
	assert.EqualValues(t, 3, sumInt(m["messaging.client.sent.messages"]))
	assert.EqualValues(t, 3, sumInt(m["messaging.client.consumed.messages"]))
	assert.EqualValues(t, 1, sumInt(m["azdispatch.listener.poisoned"]))
	var processed uint64
	for _, dp := range m["messaging.process.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		processed += dp.Count
	}
	assert.EqualValues(t, 3, processed)
}

func sumInt(m metricdata.Metrics) int64 {
	var n int64
	if s, ok := m.Data.(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			n += dp.Value
		}
	}
	return n
}

// With propagation off, a traced publisher writes exactly what an
// untraced one does: the Azure Functions-compatible Base64(JSON()) text,
// which that codec reads back unchanged.
func TestTraceContextOffLeavesTheTextAsTheCodecWroteIt(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	ctx := context.Background()
	codec := azdispatch.Base64(azdispatch.JSON())
	body := order{ID: 42}
	want, err := codec.Encode(body)
	require.NoError(t, err)

	texts := map[string]string{}
	for name, mw := range map[string][]azdispatch.SendMiddleware{"untraced": nil, "traced": {inst}} {
		q := memqueue.New(name, nil)
		pub, err := azdispatch.NewPublisher[order](q, &azdispatch.PublisherOptions{Codec: codec, Middleware: mw})
		require.NoError(t, err)
		_, err = pub.Send(ctx, body)
		require.NoError(t, err)
		ds, err := q.Receive(ctx, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, ds, 1)
		texts[name] = ds[0].Text
	}
	assert.Equal(t, want, texts["traced"], "byte for byte the codec's text")
	assert.Equal(t, texts["untraced"], texts["traced"])
	var got order
	require.NoError(t, codec.Decode(texts["traced"], &got), "the Functions-compatible codec reads it unchanged")
	assert.Equal(t, body, got)
	require.Len(t, tel.byName()["send traced"], 1, "the send is traced all the same")
}

func TestParentFromMessageMakesOneTrace(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{Propagate: true, ParentFromMessage: true})
	sendAndHandleOne(t, inst, memqueue.New("parented", nil))
	spans := tel.byName()
	send, process := spans["send parented"][0], spans["process parented"][0]
	assert.Equal(t, send.SpanContext.TraceID(), process.SpanContext.TraceID())
	assert.Equal(t, send.SpanContext.SpanID(), process.Parent.SpanID())
	require.Len(t, process.Links, 1)
}

func TestFailuresAreRecordedWithTheirType(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{})
	q := memqueue.New("failing", nil)
	_, err := q.Send(context.Background(), `{"id":1}`, nil)
	require.NoError(t, err)
	q.FailNext(azdispatch.OpDelete, 1, nil) // one 503 ServerBusy
	calls := 0
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[order]) error {
		calls++
		if calls == 1 {
			panic("first try panics")
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond),
		},
		Retry:             func(int64) time.Duration { return time.Second },
		VisibilityTimeout: time.Second, // the message whose delete failed comes back soon
		// the message whose delete failed comes back soon
		Middleware: []azdispatch.Middleware{inst},
	})
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })
	spans := tel.byName()
	var types []string
	for _, p := range spans["process failing"] {
		types = append(types, attr(p, "error.type").AsString())
	}
	assert.Contains(t, types, "panic")
	var settleErrors []string
	for _, s := range settleSpans(tel) {
		if v := attr(s, "error.type").AsString(); v != "" {
			settleErrors = append(settleErrors, attr(s, "messaging.operation.name").AsString()+" "+v)
		}
	}
	assert.Equal(t, []string{"delete ServerBusy"}, settleErrors)
}

// settleSpans are the spans of deletes, releases and poison moves.
func settleSpans(tel *telemetry) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tel.spans.GetSpans() {
		if attr(s, "messaging.operation.type").AsString() == "settle" {
			out = append(out, s)
		}
	}
	return out
}

// Run called inside a span does not make every message's spans its
// children: consumer-side spans start traces of their own.
func TestConsumerSpansDoNotInheritRunsSpan(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{Propagate: true})
	q := memqueue.New("rooted", nil)
	_, err := q.Send(context.Background(), `{"id":1}`, nil)
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[order]) error { return nil }, quick(inst))
	require.NoError(t, err)
	runCtx, runSpan := tel.tp.Tracer("app").Start(context.Background(), "worker main")
	ctx, stop := context.WithCancel(runCtx)
	var run sync.WaitGroup
	run.Go(func() { assert.NoError(t, l.Run(ctx)) })
	assert.Eventually(t, func() bool { return l.State().Succeeded == 1 }, 20*time.Second, 5*time.Millisecond)
	stop()
	run.Wait()
	runSpan.End()
	for _, s := range tel.spans.GetSpans() {
		if s.Name == "worker main" {
			continue
		}
		assert.False(t, s.Parent.IsValid(), "span %q is a child of Run's span", s.Name)
		assert.NotEqual(t, runSpan.SpanContext().TraceID(), s.SpanContext.TraceID(), "span %q", s.Name)
	}
}

// A message sent for later carries its metadata after its due line: the
// spans of its receive and its delete link to its send all the same.
func TestADelayedMessagesSpansAreLinkedToItsSend(t *testing.T) {
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{Propagate: true})
	q := memqueue.New("traced-later", nil)
	pub, err := azdispatch.NewPublisher[order](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{inst}})
	require.NoError(t, err)
	_, err = pub.SendAfter(context.Background(), order{ID: 1}, time.Second)
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[order]) error { return nil }, quick(inst))
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == 1 })

	spans := tel.byName()
	require.Len(t, spans["send traced-later"], 1)
	send := spans["send traced-later"][0].SpanContext.SpanID()
	var linked int
	for _, r := range spans["receive traced-later"] {
		for _, link := range r.Links {
			assert.Equal(t, send, link.SpanContext.SpanID())
			linked++
		}
	}
	assert.Equal(t, 1, linked, "the receive that brought it links to its send")
	settles := settleSpans(tel)
	require.Len(t, settles, 1)
	require.Len(t, settles[0].Links, 1, "its delete links to its send")
	assert.Equal(t, send, settles[0].Links[0].SpanContext.SpanID())
}
