package keylock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
)

// Three processes' pools over four places: never more than four calls at
// once among them, every call gets a place in the end, and once every
// pool has released, every place is free.
func TestPoolsNeverHoldMoreThanThePlaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := blobs.NewMemory("c", nil, nil)
	const places = 4
	var pools []*Pool
	for range 3 {
		pools = append(pools, NewPool(New(b, "q", places, 15*time.Second, nil), "fleet", 50*time.Millisecond, time.Second))
	}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 30 {
		p := pools[i%3]
		wg.Go(func() {
			for range 5 {
				pl, err := p.Get(ctx)
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				p.Put(pl)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(places))
	assert.Equal(t, int32(places), most.Load(), "the places were used")
	for _, p := range pools {
		p.Release()
	}
	other := New(b, "q", places, 15*time.Second, nil)
	for i := range places {
		l := &Lock{locks: other, key: "fleet", name: other.blobName("fleet", i), id: blobs.NewLeaseID()}
		require.NoError(t, l.acquire(ctx), "place %d free after Release", i)
	}
}

// A place kept idle costs no request for the next call; one idle for long
// is given up by itself.
func TestAnIdlePlaceIsKeptThenGivenUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := blobs.NewMemory("c", nil, nil)
	p := NewPool(New(b, "q", 2, 15*time.Second, nil), "fleet", 100*time.Millisecond, time.Minute)
	pl, err := p.Get(ctx)
	require.NoError(t, err)
	p.Put(pl)
	before := b.Requests(blobs.OpLease)
	pl2, err := p.Get(ctx)
	require.NoError(t, err)
	assert.Same(t, pl, pl2)
	assert.Equal(t, before, b.Requests(blobs.OpLease), "kept: no request")
	p.Put(pl2)
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.idle) == 0
	}, 5*time.Second, 10*time.Millisecond, "given up once idle")
	p.Release()
	assert.Greater(t, b.Requests(blobs.OpLease), before, "released")
}

// A call that finds every place held waits until ctx ends, or until one
// is given back.
func TestAGetWaitsForAPlace(t *testing.T) {
	t.Parallel()
	b := blobs.NewMemory("c", nil, nil)
	mine := NewPool(New(b, "q", 1, 15*time.Second, nil), "fleet", time.Minute, time.Minute)
	theirs := NewPool(New(b, "q", 1, 15*time.Second, nil), "fleet", time.Minute, time.Minute)
	held, err := theirs.Get(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = mine.Get(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	theirs.Put(held)
	theirs.Release()
	pl, err := mine.Get(context.Background())
	require.NoError(t, err, "free once they released it")
	mine.Put(pl)
	mine.Release()
}

// A blob service that hangs holds up no search for long: the search gives
// up, and the next one finds a place once the service answers again.
func TestASearchOfAHungServiceIsBounded(t *testing.T) {
	t.Parallel()
	var hang atomic.Bool
	hang.Store(true)
	b := blobs.NewMemory("c", nil, func(ctx context.Context, op blobs.Op, _ string) (error, bool) {
		if hang.Load() {
			<-ctx.Done()
			return ctx.Err(), false
		}
		return nil, false
	})
	p := NewPool(New(b, "q", 1, 15*time.Second, nil), "fleet", time.Minute, time.Minute)
	go func() { time.Sleep(giveUpWithin + time.Second); hang.Store(false) }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*giveUpWithin)
	defer cancel()
	pl, err := p.Get(ctx)
	require.NoError(t, err, "found once the service answered")
	p.Put(pl)
	p.Release()
}

// A pool whose places are all held elsewhere but one finds that one in one
// search: a listing, then one acquire, where tries at random would mostly
// hit held places.
func TestASearchFindsTheOneFreePlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var lists, leases atomic.Int32
	b := blobs.NewMemory("c", nil, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		switch op {
		case blobs.OpList:
			lists.Add(1)
		case blobs.OpLease:
			leases.Add(1)
		}
		return nil, false
	})
	const places = 48
	other := New(b, "q", places, 15*time.Second, nil)
	free := 29
	for i := range places {
		l := &Lock{locks: other, key: "fleet", name: other.blobName("fleet", i), id: blobs.NewLeaseID()}
		require.NoError(t, l.acquire(ctx))
		if i == free { // used before, and given up
			_, err := b.ReleaseLease(ctx, l.name, l.id)
			require.NoError(t, err)
		}
	}
	lists.Store(0)
	leases.Store(0)
	p := NewPool(New(b, "q", places, 15*time.Second, nil), "fleet", time.Minute, time.Minute)
	pl, err := p.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, other.blobName("fleet", free), pl.lock.name)
	assert.EqualValues(t, 1, lists.Load(), "one listing")
	assert.EqualValues(t, 1, leases.Load(), "one acquire")
	p.Put(pl)
	p.Release()
}

// A credential that may lease but not list (the blob SAS a listener needs
// without limits) still finds a place: the first listing is refused, and
// the searches from then on try places at random, listing no more.
func TestASearchWithoutListTriesPlacesAtRandom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var lists atomic.Int32
	forbidden := &azcore.ResponseError{StatusCode: http.StatusForbidden, ErrorCode: "AuthorizationPermissionMismatch"}
	b := blobs.NewMemory("c", nil, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		if op == blobs.OpList {
			lists.Add(1)
			return forbidden, false
		}
		return nil, false
	})
	p := NewPool(New(b, "q", 4, 15*time.Second, nil), "fleet", time.Minute, time.Minute)
	var held []*Place
	for range 4 {
		pl, err := p.Get(ctx)
		require.NoError(t, err)
		held = append(held, pl)
	}
	assert.EqualValues(t, 1, lists.Load(), "one listing refused, then none")
	for _, pl := range held {
		p.Put(pl)
	}
	p.Release()
}

// A process never holds more places than there are, even where the
// service lists one it holds as free (its lease expired unseen: a clock
// that jumped, a process paused): a search that waited for another to end
// takes no place more once that one took the last.
func TestASearchTakesNoPlaceMoreThanThereAreWhenLeasesExpiredUnseen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, advance := manualClock()
	var hold atomic.Bool
	searching, goOn := make(chan struct{}, 1), make(chan struct{})
	b := blobs.NewMemory("c", clock, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
		if op == blobs.OpList && hold.CompareAndSwap(true, false) {
			searching <- struct{}{}
			<-goOn
		}
		return nil, false
	})
	p := NewPool(New(b, "q", 2, 15*time.Second, nil), "fleet", time.Minute, time.Minute)
	first, err := p.Get(ctx)
	require.NoError(t, err)
	advance(72 * time.Hour) // the first place's lease has expired, unseen

	hold.Store(true)
	type got struct {
		pl  *Place
		err error
	}
	second, third := make(chan got, 1), make(chan got, 1)
	go func() { pl, err := p.Get(ctx); second <- got{pl, err} }()
	<-searching // the second's search is under way
	thirdCtx, cancelThird := context.WithCancel(ctx)
	defer cancelThird()
	go func() { pl, err := p.Get(thirdCtx); third <- got{pl, err} }()
	time.Sleep(50 * time.Millisecond) // the third waits, for the search or for a place given back
	close(goOn)
	g := <-second
	require.NoError(t, g.err)
	select {
	case g3 := <-third:
		t.Fatalf("a third place of two: %v, %v", g3.pl, g3.err)
	case <-time.After(300 * time.Millisecond):
	}
	p.mu.Lock()
	assert.Equal(t, 2, p.held)
	p.mu.Unlock()

	p.Put(first)
	g3 := <-third
	require.NoError(t, g3.err)
	assert.Same(t, first, g3.pl, "the place given back")
	p.Put(g.pl)
	p.Put(g3.pl)
	p.Release()
}

// Seeded rounds of two processes' pools over a few places, with requests
// that fail or whose answers are lost after they took effect, and a clock
// that jumps past every lease: a process never has more calls inside than
// there are places, and every call gets a place in the end.
func TestPoolsUnderFaultsAndClockJumpsKeepTheirBound(t *testing.T) {
	t.Parallel()
	unavailable := &azcore.ResponseError{StatusCode: http.StatusServiceUnavailable, ErrorCode: "ServerBusy"}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 0x9e3779b9))
			var rmu sync.Mutex
			draw := func(n int) int { rmu.Lock(); defer rmu.Unlock(); return r.IntN(n) }
			clock, advance := manualClock()
			b := blobs.NewMemory("c", clock, func(_ context.Context, op blobs.Op, _ string) (error, bool) {
				if op != blobs.OpList && op != blobs.OpLease {
					return nil, false
				}
				switch draw(20) {
				case 0:
					return unavailable, false
				case 1:
					return nil, true // done, its answer lost
				}
				return nil, false
			})
			places := 1 + draw(3)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for range 2 {
				p := NewPool(New(b, "q", places, 15*time.Second, nil), "fleet", 5*time.Millisecond, 20*time.Millisecond)
				var inside atomic.Int32
				for range 4 {
					wg.Go(func() {
						for range 6 {
							pl, err := p.Get(ctx)
							if !assert.NoError(t, err, "every call gets a place in the end") {
								return
							}
							if n := inside.Add(1); n > int32(places) {
								t.Errorf("%d calls of one process inside, past %d places", n, places)
							}
							if draw(4) == 0 {
								advance(time.Duration(1+draw(3)) * 24 * time.Hour) // every lease expires, unseen
							}
							time.Sleep(time.Duration(draw(2000)) * time.Microsecond)
							inside.Add(-1)
							p.Put(pl)
						}
					})
				}
				defer p.Release()
			}
			wg.Wait()
		})
	}
}
