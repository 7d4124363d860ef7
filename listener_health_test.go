package azdispatch

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestHealthTracksFatalErrorsByKindUntilTheySucceedOrLapse(t *testing.T) {
	t.Parallel()
	var h health
	t0 := time.Unix(1_700_000_000, 0)
	forbidden := &StorageError{Op: "delete", StatusCode: 403, Code: "AuthorizationPermissionMismatch"}
	busy := &StorageError{Op: "receive", StatusCode: 503, Code: "ServerBusy"}

	assert.False(t, h.fail(busy, t0), "a transient error is not fatal")
	err, _ := h.fatalState(t0)
	assert.NoError(t, err)
	last, at := h.last()
	assert.Equal(t, error(busy), last)
	assert.Equal(t, t0, at)

	assert.True(t, h.fail(forbidden, t0), "the first fatal error of its kind begins a fatal state")
	assert.False(t, h.fail(forbidden, t0.Add(time.Minute)), "it stands: no second beginning")
	err, since := h.fatalState(t0.Add(time.Minute))
	assert.ErrorIs(t, err, ErrFatal)
	assert.Equal(t, t0, since)
	assert.Nil(t, h.succeed(OpReceive), "a receive's success does not clear a delete's error")
	assert.Equal(t, error(forbidden), h.succeed(OpDelete))
	err, _ = h.fatalState(t0.Add(time.Minute))
	assert.NoError(t, err)

	assert.True(t, h.fail(forbidden, t0))
	err, _ = h.fatalState(t0.Add(fatalStale - time.Second))
	assert.Error(t, err)
	err, _ = h.fatalState(t0.Add(fatalStale))
	assert.NoError(t, err, "lapsed: that kind of request has not failed for a while")
	assert.True(t, h.fail(forbidden, t0.Add(fatalStale)), "and begins again if it does")
	assert.False(t, errors.Is(busy, ErrFatal))
}
