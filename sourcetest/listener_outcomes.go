package sourcetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
)

// testListenerSuccess: a handler that returns nil has its message deleted.
func testListenerSuccess(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	id := send(t, q, jobText, nil)
	var c handled
	s := runUntil(t, q, c.handler(func(context.Context, int) error { return nil }), options(),
		"the message succeeded", succeeded(1))

	calls := c.all()
	if assert.Len(t, calls, 1) {
		assert.Equal(t, call{id: id, dequeue: 1, body: job{N: 7}}, calls[0])
	}
	assert.EqualValues(t, 1, s.Succeeded)
	assert.Zero(t, s.Failed)
	assertDepth(t, q, b, 0, "deleted after success")
}

// testListenerRetry: a handler that fails once is called again, with the
// dequeue count raised, and its message counted as retried.
func testListenerRetry(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	send(t, q, jobText, nil)
	var c handled
	s := runUntil(t, q, c.handler(func(_ context.Context, n int) error {
		if n == 1 {
			return errFailed
		}
		return nil
	}), options(), "the message succeeded on its second try", succeeded(1))

	calls := c.all()
	if assert.Len(t, calls, 2) {
		assert.EqualValues(t, 1, calls[0].dequeue)
		assert.EqualValues(t, 2, calls[1].dequeue)
	}
	assert.EqualValues(t, 1, s.Failed)
	assert.EqualValues(t, 1, s.Retried)
	assert.EqualValues(t, 1, s.Succeeded)
	assertDepth(t, q, b, 0, "deleted after the retry succeeded")
}

// testListenerPoisonAfterTries: a handler that always fails has its message
// poisoned on its last try, with a reason that says so.
func testListenerPoisonAfterTries(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	id := send(t, q, jobText, nil)
	opts := options()
	opts.MaxDequeueCount = 3
	var c handled
	s := runUntil(t, q, c.handler(func(context.Context, int) error { return errFailed }), opts,
		"the message was poisoned", poisonedN(1))

	assert.Len(t, c.all(), 3, "one call per try")
	assert.EqualValues(t, 3, s.Failed)
	assert.EqualValues(t, 2, s.Retried)
	assert.EqualValues(t, 1, s.Poisoned)
	assertEnvelope(t, poisoned(t, q), q, id, jobText, 3, "failed 3 times", errFailed.Error())
	assertDepth(t, q, b, 0, "moved out of the source")
}

// testListenerPermanent: azdispatch.Permanent poisons after one call.
func testListenerPermanent(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	id := send(t, q, jobText, nil)
	var c handled
	s := runUntil(t, q, c.handler(func(context.Context, int) error { return azdispatch.Permanent(errFailed) }), options(),
		"the message was poisoned", poisonedN(1))

	assert.Len(t, c.all(), 1, "no retry")
	assert.Zero(t, s.Retried)
	assertEnvelope(t, poisoned(t, q), q, id, jobText, 1, "permanent", errFailed.Error())
	assertDepth(t, q, b, 0, "moved out of the source")
}

// testListenerPanic: a panic is recovered, counted, and retried.
func testListenerPanic(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	send(t, q, jobText, nil)
	var c handled
	s := runUntil(t, q, c.handler(func(_ context.Context, n int) error {
		if n == 1 {
			panic("sourcetest: handler panicked on purpose")
		}
		return nil
	}), options(), "the message succeeded after the panic", succeeded(1))

	assert.Len(t, c.all(), 2)
	assert.EqualValues(t, 1, s.Panics)
	assert.EqualValues(t, 1, s.Failed, "a panic is a failure")
	assert.EqualValues(t, 1, s.Retried)
	assertDepth(t, q, b, 0, "deleted after the retry succeeded")
}

// testListenerTimeout: a handler past HandlerTimeout has its context ended
// with cause ErrHandlerTimeout, and its message is retried.
func testListenerTimeout(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	send(t, q, jobText, nil)
	opts := options()
	opts.HandlerTimeout = 200 * time.Millisecond
	var c handled
	s := runUntil(t, q, c.handler(func(ctx context.Context, n int) error {
		if n == 1 {
			<-ctx.Done() // ends at the timeout; the test's wait bounds it
			return ctx.Err()
		}
		return nil
	}), opts, "the message succeeded after the timeout", succeeded(1))

	calls := c.all()
	if assert.Len(t, calls, 2) {
		assert.ErrorIs(t, calls[0].cause, azdispatch.ErrHandlerTimeout)
		assert.EqualValues(t, 2, calls[1].dequeue)
	}
	assert.EqualValues(t, 1, s.Failed, "a timeout is a failure")
	assert.EqualValues(t, 1, s.Retried)
	assertDepth(t, q, b, 0, "deleted after the retry succeeded")
}

// testListenerUndecodable: text the codec cannot decode is poisoned without
// a handler call, its reason the decode error.
func testListenerUndecodable(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	const text = "this is not JSON"
	id := send(t, q, text, nil)
	var c handled
	s := runUntil(t, q, c.handler(func(context.Context, int) error { return nil }), options(),
		"the message was poisoned", poisonedN(1))

	assert.Empty(t, c.all(), "the handler never sees it")
	assert.Zero(t, s.Failed, "not a handler failure")
	env := poisoned(t, q)
	assertEnvelope(t, env, q, id, text, 1)
	assert.True(t, strings.HasPrefix(env.Reason, "decode:"), "reason %q names the decode error", env.Reason)
	assertDepth(t, q, b, 0, "moved out of the source")
}
