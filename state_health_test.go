package azdispatch

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The listener keys each fatal error by the kind of request that failed:
// a receive's success does not clear a delete's error.
func TestHealthTracksFatalErrorsByKindUntilTheySucceed(t *testing.T) {
	t.Parallel()
	l := &Listener[int]{}
	forbidden := &StorageError{Op: "delete", StatusCode: 403, Code: "AuthorizationPermissionMismatch"}
	busy := &StorageError{Op: "receive", StatusCode: 503, Code: "ServerBusy"}

	assert.False(t, l.storageFault(busy), "a transient error is not fatal")
	err, _ := l.health.Fatal(time.Now())
	assert.NoError(t, err)
	last, _ := l.health.Last()
	assert.Equal(t, error(busy), last)

	assert.True(t, l.storageFault(forbidden), "the first fatal error of its kind begins a fatal state")
	assert.False(t, l.storageFault(forbidden), "it stands: no second beginning")
	err, _ = l.health.Fatal(time.Now())
	assert.ErrorIs(t, err, ErrFatal)
	assert.Nil(t, l.health.Succeed(OpReceive), "a receive's success does not clear a delete's error")
	assert.Equal(t, error(forbidden), l.health.Succeed(OpDelete))
	assert.False(t, errors.Is(busy, ErrFatal))
}
