package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testLeaseOptions is the shortest lease the service allows, with quick
// tries, so that takeovers happen in seconds.
func testLeaseOptions() *LeaseOptions {
	return &LeaseOptions{Duration: 15 * time.Second, RenewEvery: 3 * time.Second, AcquireEvery: 500 * time.Millisecond}
}

// holding runs lease.Run in the background with a function that records
// when it starts and when its context ends, and waits for that context.
type holding struct {
	started, ended chan time.Time
	cause          atomic.Value
	result         chan error
	cancel         context.CancelFunc
}

func hold(l *Lease) *holding {
	h := &holding{started: make(chan time.Time, 1), ended: make(chan time.Time, 1), result: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.result <- l.Run(ctx, func(ctx context.Context) error {
			h.started <- time.Now()
			<-ctx.Done()
			h.cause.Store(context.Cause(ctx))
			h.ended <- time.Now()
			return ctx.Err()
		})
	}()
	return h
}

func (h *holding) waitStarted(t testing.TB, within time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-h.started:
		return at
	case <-time.After(within):
		t.Fatalf("the function did not start within %v", within)
		return time.Time{}
	}
}

func TestLeaseRunsOneHolderAndHandsOverOnRelease(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	name := uniqueName(t)
	first, err := NewLease(a, name, testLeaseOptions())
	require.NoError(t, err)
	second, err := NewLease(a, name, testLeaseOptions())
	require.NoError(t, err)

	h1 := hold(first)
	h1.waitStarted(t, time.Minute)
	h2 := hold(second)
	select {
	case <-h2.started:
		t.Fatal("a second holder started while the first holds the lease")
	case <-time.After(4 * time.Second): // more than one renewal of the first
	}
	h1.cancel() // a clean exit releases the lease
	require.NoError(t, ignoreCanceled(<-h1.result))
	released := time.Now()
	at := h2.waitStarted(t, time.Minute)
	assert.Less(t, at.Sub(released), 10*time.Second, "taken over at the next try, not after the lease expired")
	h2.cancel()
	require.NoError(t, ignoreCanceled(<-h2.result))
	assert.Positive(t, first.Transactions().BlobLease)
	assert.Positive(t, second.Transactions().BlobLease)
	tx := first.Transactions()
	assert.Equal(t, tx.Total(), tx.BlobLease+tx.BlobRead+tx.BlobWrite,
		"a lease makes lease requests, reads and writes of its fence, and blob writes to create its blob")
	assert.Equal(t, int64(1), tx.BlobRead, "one read of the fence per acquisition")
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func TestLeaseIsTakenOverAfterTheHolderDies(t *testing.T) {
	long(t)
	t.Parallel()
	a := testAccount(t, nil)
	name := uniqueName(t)
	// A holder that took the lease and died: it never renews or releases.
	waiter, err := NewLease(a, name, testLeaseOptions())
	require.NoError(t, err)
	blob := leaseBlob(t, a, name)
	dead, err := lease.NewBlobClient(blob, nil)
	require.NoError(t, err)
	_, err = dead.AcquireLease(context.Background(), 15, nil)
	require.NoError(t, err)
	died := time.Now()

	h := hold(waiter)
	at := h.waitStarted(t, time.Minute)
	assert.GreaterOrEqual(t, at.Sub(died), 14*time.Second, "not before the dead holder's lease expired")
	assert.Less(t, at.Sub(died), 15*time.Second+10*time.Second, "within one lease period and a try")
	h.cancel()
	require.NoError(t, ignoreCanceled(<-h.result))
}

func TestLeaseHolderCutOffFromStorageStopsBeforeTheNextOneStarts(t *testing.T) {
	long(t)
	t.Parallel()
	var cut atomic.Bool
	f := &faultTransport{fail: func(*http.Request) bool { return cut.Load() }}
	f.next = newHTTPClient()
	name := uniqueName(t)
	cutOff, err := NewLease(faultyAccount(t, f, 0), name, testLeaseOptions())
	require.NoError(t, err)
	other, err := NewLease(testAccount(t, nil), name, testLeaseOptions())
	require.NoError(t, err)

	h1 := hold(cutOff)
	h1.waitStarted(t, time.Minute)
	cut.Store(true) // its renewals and its release now fail: as good as dead
	h2 := hold(other)

	var ended time.Time
	select {
	case ended = <-h1.ended:
	case <-time.After(time.Minute):
		t.Fatal("the cut-off holder was never told")
	}
	cause, _ := h1.cause.Load().(error)
	assert.ErrorIs(t, cause, ErrOwnershipLost)
	assert.ErrorIs(t, <-h1.result, ErrOwnershipLost)
	at := h2.waitStarted(t, time.Minute)
	assert.True(t, ended.Before(at), "the old holder's context ended before the new holder started")
	h2.cancel()
	require.NoError(t, ignoreCanceled(<-h2.result))
}

func TestLeaseOptionsAreChecked(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	for _, c := range []*LeaseOptions{
		{Duration: 10 * time.Second},
		{Duration: 61 * time.Second},
		{Duration: 15 * time.Second, RenewEvery: 15 * time.Second},
		{AcquireEvery: -time.Second},
	} {
		_, err := NewLease(a, "x", c)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", c)
	}
	_, err := NewLease(a, "", nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	noBlob, err := NewAccountWithSharedKey("http://127.0.0.1:1/devstoreaccount1", "devstoreaccount1", emulatorKey, nil)
	require.NoError(t, err)
	_, err = NewLease(noBlob, "x", nil)
	assert.ErrorIs(t, err, ErrNoBlobService)
}

// leaseBlob makes the blob of the lease called name in the default
// container, as a contender's first acquire would, and returns its client.
func leaseBlob(t *testing.T, a *Account, name string) *blockblob.Client {
	t.Helper()
	svc, err := a.blobService()
	require.NoError(t, err)
	cc := svc.NewContainerClient("azdispatch-leases")
	if _, err := cc.Create(context.Background(), nil); err != nil {
		require.True(t, bloberror.HasCode(err, bloberror.ContainerAlreadyExists), "%v", err)
	}
	b := cc.NewBlockBlobClient(name)
	_, err = b.UploadBuffer(context.Background(), nil, nil)
	require.NoError(t, err)
	return b
}
