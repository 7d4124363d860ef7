package azdispatch_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// callInfo keys the MessageInfo a middleware saw in the handler's context.
type callInfo struct{}

// A middleware's Call and the handler's Message describe a message alike,
// from one MessageInfo: the metadata the publisher carried, and a
// scheduler's occurrence, included.
func TestCallAndMessageDescribeAMessageAlike(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	clock := memqueue.NewManualClock(schedStart.Add(500 * time.Millisecond))
	q := memqueue.New("alike", &memqueue.Options{Clock: clock})
	tenant := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		s.Set("tenant", "contoso")
		return s.Next(ctx)
	})
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Middleware: []azdispatch.SendMiddleware{tenant}})
	require.NoError(t, err)

	type seen struct{ call, msg azdispatch.MessageInfo }
	handled := make(chan seen, 1)
	record := azdispatch.MiddlewareFunc(func(ctx context.Context, c *azdispatch.Call) error {
		return c.Next(context.WithValue(ctx, callInfo{}, c.MessageInfo))
	})
	l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[string]) error {
		call, _ := ctx.Value(callInfo{}).(azdispatch.MessageInfo)
		select {
		case handled <- seen{call, m.MessageInfo}:
		default: // a later occurrence: the test has what it needs
		}
		return nil
	}, &azdispatch.ListenerOptions{
		Middleware: []azdispatch.Middleware{record},
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 10*time.Millisecond),
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	done := make(chan error, 2)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})

	_, err = pub.Send(ctx, "plain")
	require.NoError(t, err)
	s := <-handled
	assert.Equal(t, s.msg, s.call)
	assert.Equal(t, azdispatch.Metadata{"tenant": "contoso"}, s.msg.Metadata)
	assert.Nil(t, s.msg.Occurrence, "not a scheduler's")

	sched, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "a", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, sched.Add(azdispatch.Schedule[string]{Name: "tick", Every: 10 * time.Second, Messages: echo}))
	go func() { done <- sched.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s = <-handled:
		case <-time.After(20 * time.Millisecond):
			clock.Advance(time.Second) // until an occurrence comes due
			continue
		case <-deadline:
			t.Fatal("no occurrence was handled")
		}
		break
	}
	assert.Equal(t, s.msg, s.call)
	require.NotNil(t, s.call.Occurrence, "the Call has the occurrence too")
	assert.Equal(t, "tick", s.call.Occurrence.Schedule)
	assert.Equal(t, azdispatch.Metadata{"tenant": "contoso"}, s.call.Metadata)
}
