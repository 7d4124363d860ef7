package azdispatch

import (
	"context"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fencing "github.com/azdispatch/azdispatch/internal/lease"
)

// fenceOf runs l once and returns the fence its function saw.
func fenceOf(t *testing.T, l *Lease) int64 {
	t.Helper()
	var fence int64
	var ok bool
	err := l.Run(context.Background(), func(ctx context.Context) error {
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		fence, ok = LeaseFence(child)
		return nil
	})
	require.NoError(t, err)
	require.True(t, ok, "the function's context carries the fence")
	return fence
}

// lostReplies passes requests on and, for those lose picks, replaces the
// service's answer with 503 ServerBusy: the request took effect, but the
// client cannot know it.
type lostReplies struct {
	next policy.Transporter
	lose func(*http.Request) bool
}

func (l *lostReplies) Do(req *http.Request) (*http.Response, error) {
	resp, err := l.next.Do(req)
	if err != nil || !l.lose(req) {
		return resp, err
	}
	resp.Body.Close()
	return serverBusy(req), nil
}

// setMetadata picks the Set Blob Metadata requests, the fence's writes.
func setMetadata(r *http.Request) bool {
	return r.Method == http.MethodPut && r.URL.Query().Get("comp") == "metadata"
}

// Each acquisition, by any contender, gets a greater fence than every one
// handed out before: after a clean handover, after a holder that acquired
// and never wrote its fence, after a fence write that failed before it
// reached the service, and after one that took effect but whose answer was
// lost (that fence is handed out once, when its answer comes back).
func TestLeaseFenceGrowsWithEveryAcquisition(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	name := uniqueName(t)
	first, err := NewLease(a, name, testLeaseOptions())
	require.NoError(t, err)
	second, err := NewLease(a, name, testLeaseOptions())
	require.NoError(t, err)
	_, ok := LeaseFence(context.Background())
	assert.False(t, ok, "no fence outside a lease's function")

	assert.Equal(t, int64(1), fenceOf(t, first), "a new lease counts from 1")
	assert.Equal(t, int64(2), fenceOf(t, second))
	assert.Equal(t, int64(3), fenceOf(t, first))

	// A contender that took the lease and let it go without a fence.
	svc, err := a.blobService()
	require.NoError(t, err)
	bare, err := lease.NewBlobClient(svc.NewContainerClient("azdispatch-leases").NewBlockBlobClient(name), nil)
	require.NoError(t, err)
	_, err = bare.AcquireLease(context.Background(), 15, nil)
	require.NoError(t, err)
	_, err = bare.ReleaseLease(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(4), fenceOf(t, second))

	// Its first fence write never reaches the service, and is not retried:
	// it lets the lease go, takes it again, and writes the fence then.
	var failures atomic32
	failures.set(1)
	f := &faultTransport{fail: func(r *http.Request) bool { return setMetadata(r) && failures.dec() }}
	failing, err := NewLease(faultyAccount(t, f, -1), name, testLeaseOptions())
	require.NoError(t, err)
	assert.Equal(t, int64(5), fenceOf(t, failing))
	assert.Equal(t, int64(1), f.hits.Load())

	// Its first fence write takes effect, unseen, and the SDK sends it
	// again: the same number under the same lease, which changes nothing.
	// 6 was never handed out before its answer came back, so it is now.
	var losses atomic32
	losses.set(1)
	l := &lostReplies{next: newHTTPClient(), lose: func(r *http.Request) bool { return setMetadata(r) && losses.dec() }}
	opts := faultyAccountOptions(&faultTransport{}, 0)
	opts.Client.Transport = l
	unlucky, err := NewLease(testAccount(t, opts), name, testLeaseOptions())
	require.NoError(t, err)
	assert.Equal(t, int64(6), fenceOf(t, unlucky))
	assert.Equal(t, int64(7), fenceOf(t, first))
}

// A lease blob whose fence was overwritten with something else is not
// counted again from 1, which could hand out a fence already used: Run
// fails, and leaves the lease free.
func TestLeaseWithABadFenceFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := testAccount(t, nil)
	name := uniqueName(t)
	l, err := NewLease(a, name, testLeaseOptions())
	require.NoError(t, err)
	blob := leaseBlob(t, a, name)
	_, err = blob.SetMetadata(ctx, map[string]*string{"fence": to.Ptr("twelve")}, nil)
	require.NoError(t, err)

	err = l.Run(ctx, func(context.Context) error {
		t.Error("the function ran without a fence")
		return nil
	})
	require.ErrorIs(t, err, fencing.ErrBadFence)
	assert.Contains(t, err.Error(), name)
	other, err := lease.NewBlobClient(blob, nil)
	require.NoError(t, err)
	_, err = other.AcquireLease(ctx, 15, nil)
	assert.NoError(t, err, "the lease was released")
}
