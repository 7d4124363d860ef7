package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThrottledShardBackOffStopsAtASecond checks the breaker's arithmetic:
// a shard that keeps answering 503 is passed over for at most about a second
// at a time (it is alive, only over its rate), while one that keeps failing
// otherwise backs off up to RetryMax.
func TestThrottledShardBackOffStopsAtASecond(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	busy := &StorageError{Op: "send", StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy", Err: errors.New("throttled")}
	unavailable := &StorageError{Op: "send", StatusCode: http.StatusServiceUnavailable, Err: errors.New("a proxy's 503")}
	gone := &StorageError{Op: "send", StatusCode: http.StatusForbidden, Code: "AuthenticationFailed", Err: errors.New("revoked")}
	tests := []struct {
		name     string
		err      error
		opts     ShardedQueueOptions
		atLeast  time.Duration // the last back-off, after 20 failures in a row
		atMost   time.Duration
		throttle bool
	}{
		{"503 at the defaults", busy, ShardedQueueOptions{}, 800 * time.Millisecond, time.Second, true},
		{"503 that is not ServerBusy", unavailable, ShardedQueueOptions{}, 48 * time.Second, time.Minute, false},
		{"403 at the defaults", gone, ShardedQueueOptions{}, 48 * time.Second, time.Minute, false},
		{"503 with a lower RetryMax", busy, ShardedQueueOptions{RetryMax: 300 * time.Millisecond}, 240 * time.Millisecond, 300 * time.Millisecond, true},
		{"503 with RetryMin above a second", busy, ShardedQueueOptions{RetryMin: 5 * time.Second, RetryMax: time.Minute}, 4 * time.Second, 5 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.throttle, throttled(tt.err))
			sq, err := NewShardedQueue("tasks", []Shard{&Queue{name: "tasks-0"}}, &tt.opts)
			require.NoError(t, err)
			set := sq.set
			set.now = func() time.Time { return now }
			for range 20 {
				set.record(context.Background(), 0, now, tt.err) // one after another, each started after the last failed
			}
			_, until, _ := set.retryAt(0)
			assert.GreaterOrEqual(t, until.Sub(now), tt.atLeast)
			assert.LessOrEqual(t, until.Sub(now), tt.atMost)
		})
	}
}

func TestShardedQueueOptionsDefaults(t *testing.T) {
	sq, err := NewShardedQueue("tasks", []Shard{&Queue{name: "tasks-0"}}, nil)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, sq.set.opts.EmptySkip)
	assert.Equal(t, 100*time.Millisecond, sq.set.opts.RetryMin)
	assert.Equal(t, time.Minute, sq.set.opts.RetryMax)
	assert.Equal(t, 2*time.Second, sq.set.opts.TryTimeout)
}

// A failure of the request itself is no shard's fault: every shard would
// answer it the same, and backing them all off would stop the whole queue.
func TestFaultBlamesTheShardOnlyForItsOwnFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		err            error
		shard, account bool
	}{
		{&StorageError{Op: "send", StatusCode: http.StatusBadRequest, Code: "InvalidQueryParameterValue"}, false, false},
		{&StorageError{Op: "send", StatusCode: http.StatusRequestEntityTooLarge}, false, false},
		{&StorageError{Op: "delete", StatusCode: http.StatusNotFound, Code: "MessageNotFound"}, false, false},
		{&MessageTooLargeError{Size: 70000, Limit: 65536}, false, false},
		{&StorageError{Op: "receive", StatusCode: http.StatusServiceUnavailable, Code: "ServerBusy"}, true, false},
		{&StorageError{Op: "receive", StatusCode: http.StatusForbidden, Code: "AuthorizationFailure"}, true, false},
		{&StorageError{Op: "receive", Err: errors.New("connection refused")}, true, true},
	} {
		shard, account := fault(ctx, tt.err)
		assert.Equal(t, tt.shard, shard, "%v", tt.err)
		assert.Equal(t, tt.account, account, "%v", tt.err)
	}
}
