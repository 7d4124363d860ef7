package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch/internal/blobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errLost = errors.New("lost")

// quick is a lease short enough for a test in memory, where no service
// bounds it.
func quick() Options {
	return Options{Duration: 600 * time.Millisecond, RenewEvery: 100 * time.Millisecond, AcquireEvery: 50 * time.Millisecond, Lost: errLost}
}

func TestSplitFence(t *testing.T) {
	for _, c := range []struct {
		meta  map[string]string
		fence int64
		rest  int
		bad   bool
	}{
		{meta: nil, fence: 0},
		{meta: map[string]string{"other": "x"}, fence: 0, rest: 1},
		{meta: map[string]string{"fence": "7"}, fence: 7},
		{meta: map[string]string{"Fence": "8", "Other": "x"}, fence: 8, rest: 1},
		{meta: map[string]string{"fence": "x"}, bad: true},
		{meta: map[string]string{"fence": "0"}, bad: true},
		{meta: map[string]string{"fence": "-3"}, bad: true},
		{meta: map[string]string{"fence": ""}, bad: true},
	} {
		rest, fence, err := SplitFence(c.meta)
		if c.bad {
			assert.ErrorIs(t, err, ErrBadFence, "%v", c.meta)
			continue
		}
		require.NoError(t, err, "%v", c.meta)
		assert.Equal(t, c.fence, fence, "%v", c.meta)
		assert.Len(t, rest, c.rest, "%v", c.meta)
	}
}

// Contenders that take turns under failing and lost requests never hand
// out a fence twice, and each one's fences grow: the lost answer of a
// fence's write, sent again, does not hand its number out again, nor does
// a lost acquire keep the lease from its own contender. Seeded; the
// faults are random, the invariants hold for every seed.
func TestContendersUnderFaultsNeverShareAFence(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, 7))
			hook := func(_ context.Context, op blobs.Op, _ string) (error, bool) {
				mu.Lock()
				defer mu.Unlock()
				switch r := rng.IntN(10); {
				case op == blobs.OpLease && r == 0:
					return errors.New("injected 503"), false
				case r == 1:
					return nil, true // the request acts; its answer is lost
				}
				return nil, false
			}
			b := blobs.NewMemory("leases", nil, hook)
			seen := map[int64]int{}
			var fmu sync.Mutex
			var wg sync.WaitGroup
			for who := range 3 {
				wg.Go(func() {
					c := New(b, "one", quick())
					var last int64
					for range 4 {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						err := c.Run(ctx, func(ctx context.Context, fence int64) error {
							fmu.Lock()
							seen[fence]++
							fmu.Unlock()
							assert.Greater(t, fence, last, "contender %d's fences grow", who)
							last = fence
							time.Sleep(20 * time.Millisecond)
							return nil
						})
						cancel()
						if err != nil {
							assert.ErrorIs(t, err, errLost, "contender %d", who)
						}
					}
				})
			}
			wg.Wait()
			assert.NotEmpty(t, seen)
			for f, n := range seen {
				assert.Equal(t, 1, n, "fence %d handed out %d times", f, n)
			}
		})
	}
}

// A holder whose renewals all fail loses the lease before it expires:
// its function's context ends with the loss as its cause, and Run says so.
func TestAHolderWhoseRenewalsFailLosesTheLease(t *testing.T) {
	var cut atomic.Bool
	b := blobs.NewMemory("leases", nil, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		if cut.Load() {
			return errors.New("injected timeout"), false
		}
		return nil, false
	})
	c := New(b, "one", quick())
	var cause error
	err := c.Run(context.Background(), func(ctx context.Context, fence int64) error {
		cut.Store(true)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return ctx.Err()
	})
	require.ErrorIs(t, err, errLost)
	assert.ErrorIs(t, cause, errLost)
	assert.Contains(t, err.Error(), "no renewal succeeded")
}

// The service saying another holds the lease ends the holder at once.
func TestAHolderToldAnotherHoldsItStops(t *testing.T) {
	b := blobs.NewMemory("leases", nil, nil)
	c := New(b, "one", quick())
	err := c.Run(context.Background(), func(ctx context.Context, fence int64) error {
		_, err := b.ReleaseLease(ctx, "one", c.id) // as if it expired,
		require.NoError(t, err)
		_, err = b.AcquireLease(ctx, "one", blobs.NewLeaseID(), time.Minute) // and another took it
		require.NoError(t, err)
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, errLost)
	assert.ErrorIs(t, err, blobs.ErrLeased)
}

// A fence that is not a positive number is not counted again from 1: Run
// fails without calling its function, and leaves the lease free.
func TestABadFenceFailsAndFreesTheLease(t *testing.T) {
	ctx := context.Background()
	b := blobs.NewMemory("leases", nil, nil)
	_, err := b.Create(ctx, "one", blobs.Write{Metadata: map[string]string{"fence": "twelve"}})
	require.NoError(t, err)
	err = New(b, "one", quick()).Run(ctx, func(context.Context, int64) error {
		t.Error("the function ran without a fence")
		return nil
	})
	require.ErrorIs(t, err, ErrBadFence)
	assert.Contains(t, err.Error(), "leases/one")
	_, err = b.AcquireLease(ctx, "one", blobs.NewLeaseID(), time.Minute)
	assert.NoError(t, err, "the lease was released")
}

// A contender that waits gives up when its context ends, with its cause.
func TestAWaitEndsWithItsContext(t *testing.T) {
	ctx := context.Background()
	b := blobs.NewMemory("leases", nil, nil)
	_, err := b.Create(ctx, "one", blobs.Write{})
	require.NoError(t, err)
	_, err = b.AcquireLease(ctx, "one", blobs.NewLeaseID(), time.Minute)
	require.NoError(t, err)
	why := errors.New("shutting down")
	wctx, cancel := context.WithCancelCause(ctx)
	time.AfterFunc(200*time.Millisecond, func() { cancel(why) })
	err = New(b, "one", quick()).Run(wctx, func(context.Context, int64) error {
		t.Error("ran while another held the lease")
		return nil
	})
	assert.ErrorIs(t, err, why)
}

// A holder that runs its function again as soon as it returns does not
// take the lease back before a contender waiting for it had its try: the
// waiter holds it within the holder's first turns, where before the
// holder took it back every time (its 50 turns took a few milliseconds,
// less than the waiter's wait between two tries).
func TestAHolderThatRunsAgainLetsAWaiterHaveItsTurn(t *testing.T) {
	var leaseRequests atomic.Int64
	b := blobs.NewMemory("leases", nil, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		if op == blobs.OpLease {
			leaseRequests.Add(1)
		}
		return nil, false
	})
	holder, waiter := New(b, "one", quick()), New(b, "one", quick())
	ctx := context.Background()
	held := make(chan struct{})
	done := make(chan error, 1)
	require.NoError(t, holder.Run(ctx, func(context.Context, int64) error {
		go func() {
			done <- waiter.Run(ctx, func(context.Context, int64) error { close(held); return nil })
		}()
		for leaseRequests.Load() < 2 { // the waiter found it held
			time.Sleep(time.Millisecond)
		}
		return nil
	}))
	turns := 0
	for ; turns < 50; turns++ {
		select {
		case <-held:
		default:
			require.NoError(t, holder.Run(ctx, func(context.Context, int64) error { return nil }))
			continue
		}
		break
	}
	assert.Less(t, turns, 50, "the waiter held the lease while the holder ran again and again")
	require.NoError(t, <-done)
}

// A Run whose caller is gone already makes no request: each would be
// billed for nothing.
func TestARunForACallerGoneMakesNoRequest(t *testing.T) {
	var requests atomic.Int64
	b := blobs.NewMemory("leases", nil, func(context.Context, blobs.Op, string) (error, bool) {
		requests.Add(1)
		return nil, false
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := New(b, "one", quick()).Run(ctx, func(context.Context, int64) error {
		t.Error("ran for a caller gone")
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, requests.Load())
}
