package azdispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An error names the package once, however deep its chain. (A second
// cancel said "azdispatch: cancel …: azdispatch: message already
// cancelled".)
func TestAnErrorNamesThePackageOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newCancelRig(t)
	s, err := r.pub.SendAfter(ctx, job{N: 1}, time.Hour)
	require.NoError(t, err)
	require.NoError(t, r.pub.Cancel(ctx, s.Token))
	errs := map[string]error{"a second cancel": r.pub.Cancel(ctx, s.Token)}

	down := &StorageError{Op: OpSend, Queue: "x-0", StatusCode: 503, Code: "ServerBusy"}
	sq, err := NewShardedQueue("x", []Shard{failingShard{name: "x-0", err: down}, failingShard{name: "x-1", err: down}}, nil)
	require.NoError(t, err)
	_, errs["a send no shard took"] = sq.Send(ctx, "m", nil)
	_, errs["a send to shards backed off"] = sq.Send(ctx, "m", nil)
	errs["degraded"] = sq.Degraded()
	_, errs["requeue"] = sq.Requeue(ctx, nil)

	p, err := NewPublisher[job](r.q, &PublisherOptions{Payloads: r.store, PayloadLimits: PayloadLimits{MaxItemSize: 10}})
	require.NoError(t, err)
	_, errs["a body over its limit"] = p.SendBatch(ctx, []job{{N: 123456789}}, nil)
	for what, err := range errs {
		require.Error(t, err, what)
		assert.Equal(t, 1, strings.Count(err.Error(), "azdispatch:"), "%s: %v", what, err)
		assert.NotContains(t, err.Error(), "\n", "%s: one line", what)
	}
	assert.True(t, errors.Is(errs["a second cancel"], ErrAlreadyCancelled))
}

// failingShard fails every request with err.
type failingShard struct {
	name string
	err  error
}

func (f failingShard) Name() string { return f.name }
func (f failingShard) Receive(context.Context, int, time.Duration) ([]*Delivery, error) {
	return nil, f.err
}
func (f failingShard) Delete(context.Context, *Delivery) error { return f.err }
func (f failingShard) SetVisibility(context.Context, *Delivery, time.Duration) error {
	return f.err
}
func (f failingShard) Depth(context.Context) (int, error) { return 0, f.err }
func (f failingShard) Send(context.Context, string, *SendOptions) (string, error) {
	return "", f.err
}
