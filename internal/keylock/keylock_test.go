package keylock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
)

func TestAPlaceIsOneProcesssUntilReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := blobs.NewMemory("c", nil, nil)
	a, other := New(b, "q", 1, 15*time.Second, nil), New(b, "q", 1, 15*time.Second, nil)
	l, err := a.Take(ctx, "customer-1")
	require.NoError(t, err)
	assert.Equal(t, int64(3), b.Requests(blobs.OpLease)+b.Requests(blobs.OpWrite), "first use: acquire, make the blob, acquire")
	_, err = other.Take(ctx, "customer-1")
	require.ErrorIs(t, err, ErrHeld)
	l2, err := other.Take(ctx, "customer-2")
	require.NoError(t, err, "another key is free")
	require.NoError(t, l.Release(ctx))
	before := b.Requests(blobs.OpLease)
	l3, err := other.Take(ctx, "customer-1")
	require.NoError(t, err, "released: taken at once")
	assert.Equal(t, before+1, b.Requests(blobs.OpLease), "one request once the blob exists")
	require.NoError(t, l2.Release(ctx))
	require.NoError(t, l3.Release(ctx))
}

func TestAKeyWithTwoPlacesLetsTwoHoldIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := blobs.NewMemory("c", nil, nil)
	ls := New(b, "q", 2, 15*time.Second, nil)
	x, err := ls.Take(ctx, "k")
	require.NoError(t, err)
	y, err := ls.Take(ctx, "k")
	require.NoError(t, err)
	_, err = ls.Take(ctx, "k")
	require.ErrorIs(t, err, ErrHeld)
	require.NoError(t, x.Release(ctx))
	require.NoError(t, y.Release(ctx))
}

// A holder renews its lease while it runs: on a clock of its own, the
// lease would otherwise have expired long before.
func TestAHolderRenewsAndAnotherTakesAnExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, advance := manualClock()
	b := blobs.NewMemory("c", clock, nil)
	var lost sync.Map
	ls := New(b, "q", 1, 300*time.Millisecond, func(key string, err error) { lost.Store(key, err) })
	l, err := ls.Take(ctx, "k")
	require.NoError(t, err)
	renewed := b.Requests(blobs.OpLease)
	require.Eventually(t, func() bool { return b.Requests(blobs.OpLease) >= renewed+2 }, 10*time.Second, 10*time.Millisecond, "renewed")
	require.NoError(t, l.Release(ctx))

	// A holder that dies (no release, no renewals) loses the place when
	// the lease expires.
	dead := &Lock{locks: ls, key: "k", name: ls.blobName("k", 0), id: blobs.NewLeaseID()}
	require.NoError(t, dead.acquire(ctx))
	_, err = New(b, "q", 1, 300*time.Millisecond, nil).Take(ctx, "k")
	require.ErrorIs(t, err, ErrHeld)
	advance(time.Second)
	l2, err := New(b, "q", 1, 300*time.Millisecond, nil).Take(ctx, "k")
	require.NoError(t, err, "expired: another takes it")
	require.NoError(t, l2.Release(ctx))
	_, ok := lost.Load("k")
	assert.False(t, ok)
}

// An acquire whose answer was lost after it took effect is taken for the
// holder's own by its retry (the same lease ID); a failed one holds
// nothing.
func TestALostAnswerIsRecognisedAndAFailureHoldsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var loseNext, failNext atomic.Bool
	b := blobs.NewMemory("c", nil, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		if op != blobs.OpLease {
			return nil, false
		}
		if failNext.CompareAndSwap(true, false) {
			return errors.New("503"), false
		}
		return nil, loseNext.CompareAndSwap(true, false)
	})
	ls := New(b, "q", 1, 15*time.Second, nil)
	l, err := ls.Take(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	loseNext.Store(true)
	_, err = ls.Take(ctx, "k")
	require.Error(t, err, "its answer lost")
	l, err = New(b, "q", 1, 15*time.Second, nil).Take(ctx, "k")
	require.NoError(t, err, "the lease the lost answer took was given up, not left to expire")
	require.NoError(t, l.Release(ctx))

	failNext.Store(true)
	_, err = New(b, "q", 1, 15*time.Second, nil).Take(ctx, "x")
	require.Error(t, err)
	l2, err := ls.Take(ctx, "x")
	require.NoError(t, err, "the failed acquire held nothing")
	require.NoError(t, l2.Release(ctx))
}

// A place's holders keep state in its blob's metadata: read once per take,
// and not at all when this process wrote it last and nobody has since.
func TestAPlacesMetadataIsReadOnlyWhenAnotherWroteIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := blobs.NewMemory("c", nil, nil)
	mine, theirs := New(b, "q", 1, 15*time.Second, nil), New(b, "q", 1, 15*time.Second, nil)
	reads := func() int64 { return b.Requests(blobs.OpRead) }

	l, err := mine.Take(ctx, "k")
	require.NoError(t, err)
	meta, err := l.Meta(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"azdispatchkey": "1"}, meta)
	assert.Equal(t, int64(1), reads())
	require.NoError(t, l.SetMeta(ctx, map[string]string{"azdispatchkey": "1", "s": "1"}))
	require.NoError(t, l.Release(ctx))

	l, err = mine.Take(ctx, "k")
	require.NoError(t, err)
	meta, err = l.Meta(ctx)
	require.NoError(t, err)
	assert.Equal(t, "1", meta["s"])
	assert.Equal(t, int64(1), reads(), "written here last: no read")
	require.NoError(t, l.Release(ctx))

	o, err := theirs.Take(ctx, "k")
	require.NoError(t, err)
	meta, err = o.Meta(ctx)
	require.NoError(t, err)
	assert.Equal(t, "1", meta["s"], "another process reads what this one wrote")
	require.NoError(t, o.SetMeta(ctx, map[string]string{"azdispatchkey": "1", "s": "2"}))
	require.NoError(t, o.Release(ctx))

	l, err = mine.Take(ctx, "k")
	require.NoError(t, err)
	meta, err = l.Meta(ctx)
	require.NoError(t, err)
	assert.Equal(t, "2", meta["s"], "written elsewhere since: read again")
	require.NoError(t, l.Release(ctx))

	o, err = theirs.Take(ctx, "k")
	require.NoError(t, err)
	require.ErrorIs(t, l.SetMeta(ctx, map[string]string{"s": "3"}), blobs.ErrLeased, "a place given up is not written")
	require.NoError(t, o.Release(ctx))
}

// A take of a place this process is releasing waits for the release, and
// takes it, rather than find it held and give up: the next message of a
// key, just after the last one ended, is not snoozed for this process's own
// lease.
func TestATakeWaitsForThisProcesssOwnRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var slow atomic.Bool
	b := blobs.NewMemory("c", nil, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		if op == blobs.OpLease && slow.CompareAndSwap(true, false) {
			time.Sleep(200 * time.Millisecond) // the release, on its way
		}
		return nil, false
	})
	ls := New(b, "q", 1, 15*time.Second, nil)
	first, err := ls.Take(ctx, "k")
	require.NoError(t, err)
	slow.Store(true)
	released := make(chan error, 1)
	go func() { released <- first.Release(ctx) }()
	for ls.releaseOf(first.name) == nil {
		time.Sleep(time.Millisecond)
	}
	second, err := ls.Take(ctx, "k")
	require.NoError(t, err, "taken once the release was over")
	require.NoError(t, <-released)
	require.NoError(t, second.Release(ctx))
}

// manualClock is a clock that moves only when told: for a blob backend
// whose leases expire by it.
func manualClock() (now func() time.Time, advance func(time.Duration)) {
	var at atomic.Int64
	at.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return func() time.Time { return time.Unix(0, at.Load()) }, func(d time.Duration) { at.Add(int64(d)) }
}
