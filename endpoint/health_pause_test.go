package endpoint

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

var _ PauseReporter = (*azdispatch.Listener[string])(nil)

// A listener on a paused queue is ready: the readiness probe answers 200,
// and shows the pause, until when and by whom, in its check.
func TestHealthShowsAPausedListenerAsReady(t *testing.T) {
	q := memqueue.New("paused", nil)
	st, err := q.Pause(context.Background(), time.Hour, &azdispatch.PauseOptions{By: "ops: the payments API is down"})
	require.NoError(t, err)
	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error { return nil },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{ScaleInterval: 20 * time.Millisecond}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { _, on := l.Paused(); return on }, 10*time.Second, 5*time.Millisecond)

	h := NewHealth(nil)
	h.Add("orders", l)
	code, rep := probe(t, h.Readiness())
	assert.Equal(t, 200, code, "a pause is a state, not a failure")
	c := check(t, rep, "orders")
	require.NotNil(t, c.Paused)
	assert.Equal(t, st.Until.UTC(), c.Paused.Until)
	assert.Equal(t, "ops: the payments API is down", c.Paused.By)

	require.NoError(t, q.Resume(context.Background()))
	require.Eventually(t, func() bool { _, on := l.Paused(); return !on }, 10*time.Second, 5*time.Millisecond)
	_, rep = probe(t, h.Readiness())
	assert.Nil(t, check(t, rep, "orders").Paused)
}
