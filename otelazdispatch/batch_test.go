package otelazdispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// A batch handler's call has a span of its own, linked to the process span
// of each of its messages, which are linked to the messages' creation.
func TestABatchCallsSpanLinksItsMessagesSpans(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	inst := tel.instrumentation(t, otelazdispatch.Options{Propagate: true})
	q := memqueue.New("otel-batch", nil)
	pub, err := azdispatch.NewPublisher[order](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{inst}})
	require.NoError(t, err)
	const n = 5
	for i := range n {
		_, err := pub.Send(context.Background(), order{ID: i})
		require.NoError(t, err)
	}
	var got []trace.SpanContext
	l, err := azdispatch.NewBatchListener(q, func(ctx context.Context, msgs []*azdispatch.Message[order]) error {
		got = append(got, trace.SpanContextFromContext(ctx))
		return nil
	}, &azdispatch.ListenerOptions{Middleware: []azdispatch.Middleware{inst},
		Scaling: azdispatch.ScalingOptions{MaxDequeuers: 1, Idle: azdispatch.ExponentialIdle(0, 20*time.Millisecond)}})
	require.NoError(t, err)
	runUntil(t, l, func(s azdispatch.State) bool { return s.Succeeded == n })

	spans := tel.byName()["process otel-batch"]
	var batch, each int
	perMessage := map[trace.SpanID]bool{}
	for _, s := range spans {
		if attr(s, "messaging.batch.message_count").AsInt64() > 0 {
			continue
		}
		each++
		perMessage[s.SpanContext.SpanID()] = true
		assert.Len(t, s.Links, 1, "a message's span links its creation")
	}
	for _, s := range spans {
		if c := attr(s, "messaging.batch.message_count").AsInt64(); c > 0 {
			batch++
			assert.Len(t, s.Links, int(c), "one link per message")
			for _, link := range s.Links {
				assert.True(t, perMessage[link.SpanContext.SpanID()], "links a message's process span")
			}
		}
	}
	assert.Equal(t, n, each, "one span per message")
	assert.Equal(t, len(got), batch, "one span per call")
	for _, sc := range got {
		assert.True(t, sc.IsValid(), "the handler runs in its call's span")
	}
}
