package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/storagefault"
)

// A revoked credential (403) is fatal: an event, State, and Ready say so;
// once storage accepts the listener again, all three say it recovered.
func TestForbiddenIsFatalUntilStorageAcceptsAgain(t *testing.T) {
	t.Parallel()
	var revoked atomic.Bool
	revoked.Store(true)
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if revoked.Load() {
			return storagefault.ServiceError(req, http.StatusForbidden, "AuthenticationFailed", nil)
		}
		return nil
	})
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	createQueue(t, q.Name())
	var seen events
	cfg := quick()
	cfg.OnEvent = seen.record
	c := newTally()
	l, err := NewListener(q, c.handler(nil), cfg)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Ready(), ErrNotReady, "not ready before Run")

	stop := started(t, l)
	waitFor(t, "the fatal event", func() bool { return len(seen.of(EventFatal)) > 0 })
	s := l.State()
	require.Error(t, s.Fatal)
	assert.ErrorIs(t, s.Fatal, ErrFatal)
	assert.ErrorIs(t, s.Fatal, ErrFatal)
	var se *StorageError
	require.ErrorAs(t, s.Fatal, &se)
	assert.Equal(t, http.StatusForbidden, se.StatusCode)
	assert.Equal(t, OpReceive, se.Op)
	assert.False(t, s.FatalSince.IsZero())
	assert.ErrorIs(t, s.LastError, ErrFatal)
	ready := l.Ready()
	assert.ErrorIs(t, ready, ErrNotReady)
	assert.ErrorIs(t, ready, ErrFatal)
	assert.Contains(t, ready.Error(), "403")
	assert.ErrorIs(t, seen.of(EventFatal)[0].Err, ErrFatal)
	assert.Len(t, seen.of(EventFatal), 1, "one event while it stands, not one per failed receive")

	revoked.Store(false)
	sendJobs(t, q, 1)
	waitFor(t, "recovered and handled", func() bool { return c.succeeded() == 1 })
	assert.NoError(t, l.Ready())
	assert.NoError(t, l.State().Fatal)
	require.Len(t, seen.of(EventRecovered), 1)
	assert.ErrorIs(t, seen.of(EventRecovered)[0].Err, ErrFatal)
	require.NoError(t, stop())
}

// With FatalTimeout, Run shuts down and returns the fatal error once it has
// stood that long.
func TestRunReturnsAFatalErrorAfterFatalTimeout(t *testing.T) {
	t.Parallel()
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		return storagefault.ServiceError(req, http.StatusForbidden, "AuthorizationPermissionMismatch", nil)
	})
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	cfg := quick()
	cfg.FatalTimeout = 500 * time.Millisecond
	l, err := NewListener(q, newTally().handler(nil), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = l.Run(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrFatal)
	assert.Contains(t, err.Error(), "AuthorizationPermissionMismatch")
	assert.NoError(t, ctx.Err(), "Run returned on its own, not at the test's deadline")
	assert.ErrorIs(t, l.Ready(), ErrNotReady, "not running any more")
}

// A queue deleted while its listener runs is reported, not re-created.
func TestDeletedQueueIsFatalAndNotRecreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	var seen events
	cfg := quick()
	cfg.OnEvent = seen.record
	c := newTally()
	l, err := NewListener(q, c.handler(nil), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	sendJobs(t, q, 1)
	waitFor(t, "the first message handled", func() bool { return c.succeeded() == 1 })
	require.NoError(t, l.Ready())

	_, err = q.client.Delete(ctx, nil)
	require.NoError(t, err)
	waitFor(t, "the fatal event", func() bool { return len(seen.of(EventFatal)) > 0 })
	s := l.State()
	var se *StorageError
	require.ErrorAs(t, s.Fatal, &se)
	assert.Equal(t, "QueueNotFound", se.Code)
	assert.ErrorIs(t, l.Ready(), ErrFatal)
	// Let it try again a few times: it must not bring the queue back.
	failedBefore := s.ReceiveErrors
	waitFor(t, "more failed receives", func() bool { return l.State().ReceiveErrors >= failedBefore+2 })
	require.NoError(t, stop())
	_, err = q.Receive(ctx, 1, time.Second)
	assert.True(t, isQueueNotFound(err), "the queue is still gone: %v", err)
}

// A listener on a missing queue creates it only when told to.
func TestListenerCreatesItsQueueOnlyWhenTold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := testAccount(t, nil)
	missing, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	l, err := NewListener(missing, newTally().handler(nil), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "a failed receive", func() bool { return l.State().ReceiveErrors > 0 })
	require.NoError(t, stop())
	assert.ErrorIs(t, l.State().Fatal, ErrFatal)
	assert.Zero(t, missing.Transactions().Create)
	_, err = missing.Receive(ctx, 1, time.Second)
	assert.True(t, isQueueNotFound(err), "not created: %v", err)

	told, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	cfg := quick()
	cfg.CreateQueue = true
	c := newTally()
	l, err = NewListener(told, c.handler(nil), cfg)
	require.NoError(t, err)
	stop = started(t, l)
	// A receive starts only once the Create has returned: a send made
	// before might find no queue yet and create it itself.
	waitFor(t, "the queue created, and read", func() bool { return l.State().Transactions.Receive >= 1 })
	sendJobs(t, told, 1)
	waitFor(t, "handled", func() bool { return c.succeeded() == 1 })
	require.NoError(t, stop())
	// Every Create was the listener's, at its start. (One Create Queue call
	// is one request unless the SDK retried it, which a crowded emulator
	// can make it do: the count is of attempts.)
	assert.Equal(t, l.State().Transactions.Create, told.Transactions().Create)
	assert.Zero(t, l.State().ReceiveErrors)

	cannotCreate := struct{ Source }{told} // a Source without Create
	_, err = NewListener(cannotCreate, newTally().handler(nil), &ListenerOptions{CreateQueue: true, PoisonQueue: told})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerOptions.CreateQueue", ce.Field)
}

// A 500 OperationTimedOut with Retry-After is waited out: the listener's
// next receive comes no sooner than the service asked.
func TestReceiveHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var attempts []time.Time
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if !storagefault.IsReceive(req) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, time.Now())
		if len(attempts) == 1 {
			return storagefault.ServiceError(req, http.StatusInternalServerError, "OperationTimedOut", http.Header{"Retry-After": {"2"}})
		}
		return nil
	})
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	createQueue(t, q.Name())
	c := newTally()
	l, err := NewListener(q, c.handler(nil), quick())
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "a second receive", func() bool { mu.Lock(); defer mu.Unlock(); return len(attempts) >= 2 })
	require.NoError(t, stop())
	mu.Lock()
	gap := attempts[1].Sub(attempts[0])
	mu.Unlock()
	assert.GreaterOrEqual(t, gap, 2*time.Second, "the back-off after a failure is 250 ms; the service asked for 2 s")
	s := l.State()
	assert.EqualValues(t, 1, s.ReceiveErrors)
	var se *StorageError
	require.ErrorAs(t, s.LastError, &se)
	assert.Equal(t, "OperationTimedOut", se.Code)
	assert.Equal(t, 2*time.Second, se.RetryAfter)
	assert.NotErrorIs(t, se, ErrFatal, "a timeout is transient")
	assert.NoError(t, s.Fatal)
}

func TestStorageErrorClassification(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op     string
		status int
		code   string
		fatal  bool
	}{
		{"receive", 403, "AuthenticationFailed", true},
		{"send", 403, "AuthorizationPermissionMismatch", true},
		{"receive", 401, "InvalidAuthenticationInfo", true},
		{"receive", 404, "QueueNotFound", true},
		{"depth", 409, "QueueBeingDeleted", true},
		{"receive", 409, "QueueDisabled", true},
		{"delete", 404, "QueueNotFound", false}, // ownership lost, the message's fate
		{"delete", 404, "MessageNotFound", false},
		{"receive", 503, "ServerBusy", false},
		{"receive", 500, "OperationTimedOut", false},
		{"send", 400, "MessageTooLarge", false},
		{"receive", 0, "", false},
	} {
		se := &StorageError{Op: Op(tc.op), StatusCode: tc.status, Code: tc.code}
		assert.Equal(t, tc.fatal, se.Fatal(), "%s %d %s", tc.op, tc.status, tc.code)
		assert.Equal(t, tc.fatal, errors.Is(error(se), ErrFatal))
	}
}

// A poison queue that is missing and cannot be created (the credential may
// not create queues) is fatal too; the message stays in its queue.
func TestPoisonQueueThatCannotBeCreatedIsFatal(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	poisonName := q.Name() + "-poison"
	a := answeringAccount(t, func(req *http.Request) *http.Response {
		if !strings.Contains(req.URL.Path, poisonName) {
			return nil
		}
		if req.Method == http.MethodPut {
			return storagefault.ServiceError(req, http.StatusForbidden, "AuthorizationPermissionMismatch", nil)
		}
		return storagefault.ServiceError(req, http.StatusNotFound, "QueueNotFound", nil)
	})
	lq, err := a.Queue(q.Name())
	require.NoError(t, err)
	var seen events
	cfg := quick()
	cfg.OnEvent = seen.record
	l, err := NewListener(lq, newTally().handler(func(context.Context, *Message[job]) error {
		return Permanent(assert.AnError)
	}), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	sendJobs(t, q, 1)
	waitFor(t, "the fatal event", func() bool { return len(seen.of(EventFatal)) > 0 })
	require.NoError(t, stop())
	s := l.State()
	var se *StorageError
	require.ErrorAs(t, s.Fatal, &se)
	assert.Equal(t, opCreate, se.Op)
	assert.Equal(t, http.StatusForbidden, se.StatusCode)
	assert.Positive(t, s.PoisonErrors)
	assert.Zero(t, s.Poisoned)
	assert.Equal(t, 1, depth(t, q), "the message stays in its queue")
}
