package azdispatch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/memqueue"
)

type order struct{ ID string }

// Run leaves no goroutine of its own behind, however it shuts down: idle;
// with handlers that finish within the drain timeout; with handlers that
// end when the drain timeout cancels them; after a fatal error stood for
// FatalTimeout; and with a handler that ignores its cancelled context,
// which Run abandons, naming its message, 10 s after the drain timeout.
// (Not parallel: goleak sees every goroutine of the process.)
func TestRunLeavesNoGoroutineAfterAnyShutdown(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		handler  func(release <-chan struct{}) azdispatch.Handler[order]
		opts     azdispatch.ListenerOptions
		fail     error // every receive fails with it
		wantErr  error
		messages int
	}{
		{name: "idle", handler: func(<-chan struct{}) azdispatch.Handler[order] {
			return func(context.Context, *azdispatch.Message[order]) error { return nil }
		}},
		{name: "handlers finish in time", messages: 5, handler: func(<-chan struct{}) azdispatch.Handler[order] {
			return func(context.Context, *azdispatch.Message[order]) error { time.Sleep(50 * time.Millisecond); return nil }
		}},
		{name: "drain timeout cancels handlers", messages: 5, opts: azdispatch.ListenerOptions{DrainTimeout: 50 * time.Millisecond},
			handler: func(<-chan struct{}) azdispatch.Handler[order] {
				return func(ctx context.Context, _ *azdispatch.Message[order]) error { <-ctx.Done(); return ctx.Err() }
			}},
		{name: "fatal timeout", opts: azdispatch.ListenerOptions{FatalTimeout: 200 * time.Millisecond},
			fail:    &azdispatch.StorageError{Op: "receive", StatusCode: 403, Code: "AuthenticationFailed"},
			wantErr: azdispatch.ErrFatal,
			handler: func(<-chan struct{}) azdispatch.Handler[order] {
				return func(context.Context, *azdispatch.Message[order]) error { return nil }
			}},
		{name: "handler ignores its context", messages: 1, opts: azdispatch.ListenerOptions{DrainTimeout: 50 * time.Millisecond},
			wantErr: azdispatch.ErrHandlersAbandoned,
			handler: func(release <-chan struct{}) azdispatch.Handler[order] {
				return func(context.Context, *azdispatch.Message[order]) error { <-release; return nil }
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantErr == azdispatch.ErrHandlersAbandoned {
				azurite.SkipUnlessLong(t) // Run waits 10 s before it abandons a handler
			}
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			q := memqueue.New("shutdown", nil)
			if tc.fail != nil {
				q.FailNext(azdispatch.OpReceive, 1000, tc.fail)
			}
			var ids []string
			for range tc.messages {
				id, err := q.Send(ctx, `{"ID":"x"}`, nil)
				require.NoError(t, err)
				ids = append(ids, id)
			}
			release := make(chan struct{})
			defer close(release) // lets an abandoned handler end before goleak looks
			opts := tc.opts
			// Shut down once every message is in its handler: a message
			// received a moment before the shutdown is released unhandled.
			var entered atomic.Int64
			h := tc.handler(release)
			l, err := azdispatch.NewListener(q, func(ctx context.Context, m *azdispatch.Message[order]) error {
				entered.Add(1)
				return h(ctx, m)
			}, &opts)
			require.NoError(t, err)
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- l.Run(runCtx) }()
			require.Eventually(t, func() bool {
				return int(entered.Load()) >= tc.messages && (tc.fail == nil || l.State().ReceiveErrors > 0)
			}, 10*time.Second, time.Millisecond)
			if tc.fail == nil {
				stop()
			}
			var runErr error
			select {
			case runErr = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Run did not return")
			}
			stop()
			if tc.wantErr == nil {
				require.NoError(t, runErr)
				return
			}
			require.ErrorIs(t, runErr, tc.wantErr)
			if errors.Is(tc.wantErr, azdispatch.ErrHandlersAbandoned) {
				assert.Contains(t, runErr.Error(), ids[0], "the abandoned handler's message is named")
				release <- struct{}{} // the handler returns now; its goroutine ends
				require.Eventually(t, func() bool { return l.State().InFlight == 0 }, 10*time.Second, time.Millisecond)
			}
		})
	}
}
