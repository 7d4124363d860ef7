package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// judge is the one outcome table, for messages and batch items alike; its
// effects on storage are tested end to end in listener_test.go.
func TestJudgeTurnsEveryHandlerResultIntoOneAction(t *testing.T) {
	t.Parallel()
	l, err := NewListener(&Queue{name: "q"}, func(context.Context, *Message[job]) error { return nil },
		&ListenerOptions{PoisonQueue: &Queue{name: "q-poison"}, MaxDequeueCount: 3})
	require.NoError(t, err)

	// ended returns a try context that ended with cause, and a call context
	// under it.
	ended := func(cause error) (context.Context, context.Context) {
		ctx, end := context.WithCancelCause(context.Background())
		end(cause)
		return ctx, ctx
	}
	live := func() (context.Context, context.Context) { return context.Background(), context.Background() }
	ownTimeout := func() (context.Context, context.Context) {
		call, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		t.Cleanup(cancel)
		return context.Background(), call
	}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		ctxs    func() (context.Context, context.Context)
		err     error
		dequeue int64
		want    actionKind
		reason  string
	}{
		{"success deletes", live, nil, 1, actDone, ""},
		{"a call that never started is released", live, fmt.Errorf("x: %w", errNotStarted), 1, actReappearNow, ""},
		{"an error retries", live, boom, 1, actRetry, ""},
		{"a panic retries", live, &PanicError{Value: "p"}, 2, actRetry, ""},
		{"an error on the last try poisons", live, boom, 3, actPoison, "failed 3 times; last error: boom"},
		{"Permanent poisons at once", live, Permanent(boom), 1, actPoison, "permanent: boom"},
		{"the handler's own timeout is a failure", ownTimeout, context.DeadlineExceeded, 1, actRetry, ""},
		{"ownership lost: nothing to do", func() (context.Context, context.Context) { return ended(ErrOwnershipLost) }, context.Canceled, 1, actLost, ""},
		{"cut off by the drain: released", func() (context.Context, context.Context) { return ended(ErrDrainTimeout) }, context.Canceled, 3, actReappearNow, ""},
		{"another item's timeout: retried, not poisoned", func() (context.Context, context.Context) { return ended(ErrHandlerTimeout) }, context.Canceled, 3, actRetry, ""},
	}
	for _, tt := range tests {
		tryCtx, callCtx := tt.ctxs()
		tr := &try{d: &Delivery{ID: "m", DequeueCount: tt.dequeue}}
		tr.begin(context.Background())
		if tryCtx.Err() != nil {
			tr.end(context.Cause(tryCtx))
		}
		got := l.judge(tr, callCtx, tt.err)
		assert.Equal(t, tt.want, got.kind, tt.name)
		assert.Equal(t, tt.reason, got.reason, tt.name)
	}
	s := l.State()
	assert.EqualValues(t, 5, s.Failed, "errors, the panic, Permanent and the timeout count as failures")
	assert.EqualValues(t, 1, s.Panics)
}
