package health

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRecordTracksFatalErrorsByKindUntilTheySucceedOrLapse(t *testing.T) {
	t.Parallel()
	var r Record[string]
	t0 := time.Unix(1_700_000_000, 0)
	forbidden := errors.New("403 AuthorizationPermissionMismatch")
	busy := errors.New("503 ServerBusy")

	assert.False(t, r.Fail("receive", busy, false, t0), "a transient error is not fatal")
	err, _ := r.Fatal(t0)
	assert.NoError(t, err)
	last, at := r.Last()
	assert.Equal(t, busy, last)
	assert.Equal(t, t0, at)

	assert.True(t, r.Fail("delete", forbidden, true, t0), "the first fatal error of its kind begins a fatal state")
	assert.False(t, r.Fail("delete", forbidden, true, t0.Add(time.Minute)), "it stands: no second beginning")
	err, since := r.Fatal(t0.Add(time.Minute))
	assert.Equal(t, forbidden, err)
	assert.Equal(t, t0, since)
	assert.Nil(t, r.Succeed("receive"), "a receive's success does not clear a delete's error")
	assert.Equal(t, forbidden, r.Succeed("delete"))
	err, _ = r.Fatal(t0.Add(time.Minute))
	assert.NoError(t, err)

	assert.True(t, r.Fail("delete", forbidden, true, t0))
	err, _ = r.Fatal(t0.Add(Stale - time.Second))
	assert.Error(t, err)
	err, _ = r.Fatal(t0.Add(Stale))
	assert.NoError(t, err, "lapsed: that kind of request has not failed for a while")
	assert.True(t, r.Fail("delete", forbidden, true, t0.Add(Stale)), "and begins again if it does")
}

func TestTheOldestStandingErrorIsReported(t *testing.T) {
	t.Parallel()
	var r Record[string]
	t0 := time.Unix(1_700_000_000, 0)
	first, second := errors.New("first"), errors.New("second")
	r.Fail("b", second, true, t0.Add(time.Second))
	r.Fail("a", first, true, t0)
	err, since := r.Fatal(t0.Add(2 * time.Second))
	assert.Equal(t, first, err)
	assert.Equal(t, t0, since)
	r.Succeed("a")
	err, _ = r.Fatal(t0.Add(2 * time.Second))
	assert.Equal(t, second, err)
}
