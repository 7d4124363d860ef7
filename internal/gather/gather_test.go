package gather

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type member struct {
	group, id int
	key       string
}

// recorder starts every batch at once on a goroutine of its own, and
// records what each held.
type recorder struct {
	mu      sync.Mutex
	batches [][]member
	calls   sync.WaitGroup
	fail    func(member) error
}

func (r *recorder) start(b *Batch[member]) {
	r.calls.Go(func() {
		ms := b.Begin()
		r.mu.Lock()
		r.batches = append(r.batches, ms)
		r.mu.Unlock()
		errs := make([]error, len(ms))
		for i, m := range ms {
			errs[i] = r.fail(m)
		}
		b.Finish(errs)
	})
}

// Seeded runs of groups whose members join at once, wait first or end on
// their way, at random: every member that joins gets its own outcome once;
// no batch is larger than MaxItems, mixes keys with ByKey, or, without a
// wait, mixes groups; and a group whose members all join at once, no more
// than MaxItems, is one batch.
func TestBatchesFormAsTheirOptionsSay(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		opts := Options{MaxItems: 1 + rng.IntN(40), ByKey: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			opts.MaxWait = time.Duration(1+rng.IntN(20)) * time.Millisecond
		}
		calm := rng.IntN(2) == 0 // no member waits or ends on its way
		t.Run(fmt.Sprintf("seed=%d/%+v/calm=%v", seed, opts, calm), func(t *testing.T) {
			rec := &recorder{fail: func(m member) error {
				if m.id%5 == 0 {
					return fmt.Errorf("member %d/%d", m.group, m.id)
				}
				return nil
			}}
			g := New(opts, rec.start)
			groups := 1 + rng.IntN(6)
			var members sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[member]error{}
			sizes := map[int]int{}
			for gi := range groups {
				n := 1 + rng.IntN(50)
				sizes[gi] = n
				gr := g.NewGroup(n)
				for id := range n {
					m := member{group: gi, id: id, key: fmt.Sprint("k", rng.IntN(3))}
					mode := 0
					if !calm {
						mode = rng.IntN(3)
					}
					pause := time.Duration(rng.IntN(300)) * time.Microsecond
					members.Go(func() {
						var seat Seat
						seat.Sit(gr)
						switch mode {
						case 1: // waits for something first
							seat.Leave()
							time.Sleep(pause)
						case 2: // ends on its way
							time.Sleep(pause)
							seat.Leave()
							return
						}
						b, i := g.Join(m.key, &seat, m)
						<-b.Done()
						mu.Lock()
						_, twice := outcomes[m]
						outcomes[m] = b.Outcome(i)
						mu.Unlock()
						assert.False(t, twice)
					})
				}
			}
			members.Wait()
			rec.calls.Wait()
			assert.Zero(t, g.Open())
			for m, err := range outcomes {
				if m.id%5 == 0 {
					assert.EqualError(t, err, fmt.Sprintf("member %d/%d", m.group, m.id))
				} else {
					assert.NoError(t, err)
				}
			}
			perGroup := map[int]int{}
			for _, b := range rec.batches {
				require.NotEmpty(t, b)
				assert.LessOrEqual(t, len(b), opts.MaxItems)
				for _, m := range b {
					if opts.ByKey {
						assert.Equal(t, b[0].key, m.key, "one key per batch")
					}
					if opts.MaxWait == 0 {
						assert.Equal(t, b[0].group, m.group, "one group per batch")
					}
				}
				perGroup[b[0].group]++
			}
			if calm && opts.MaxWait == 0 && !opts.ByKey {
				for gi, n := range sizes {
					assert.Equal(t, (n+opts.MaxItems-1)/opts.MaxItems, perGroup[gi], "group %d of %d", gi, n)
				}
			}
		})
	}
}

// A member that leaves its batch before the call begins is not called; one
// that leaves after is.
func TestAMemberThatLeavesBeforeTheCallIsNotCalled(t *testing.T) {
	var started []*Batch[member]
	g := New(Options{MaxItems: 3, MaxWait: time.Hour}, func(b *Batch[member]) { started = append(started, b) })
	var a, b, c Seat
	ba, ia := g.Join("", &a, member{id: 1})
	assert.True(t, ba.Leave(ia))
	g.Join("", &b, member{id: 2})
	bc, ic := g.Join("", &c, member{id: 3})
	require.Len(t, started, 1, "full at 3")
	assert.Equal(t, []member{{id: 2}, {id: 3}}, bc.Begin())
	assert.False(t, bc.Leave(ic), "its call has begun")
	bc.Finish([]error{nil, errors.New("three")})
	assert.NoError(t, bc.Outcome(1))
	assert.EqualError(t, bc.Outcome(ic), "three")
}

// Stop ends the open batches uncalled, with its error, and refuses joins.
func TestStopEndsTheOpenBatches(t *testing.T) {
	stopped := errors.New("run ended")
	g := New(Options{MaxItems: 10, MaxWait: time.Hour}, func(*Batch[member]) { t.Error("no batch closes") })
	var s Seat
	b, i := g.Join("", &s, member{id: 1})
	g.Stop(stopped)
	<-b.Done()
	assert.ErrorIs(t, b.Outcome(i), stopped)
	late, _ := g.Join("", &s, member{id: 2})
	assert.Nil(t, late)
	assert.Zero(t, g.Open())
}

// A batch waits for MaxWait, then closes with what it has.
func TestABatchClosesAtMaxWait(t *testing.T) {
	closed := make(chan *Batch[member], 1)
	g := New(Options{MaxItems: 10, MaxWait: 10 * time.Millisecond}, func(b *Batch[member]) { closed <- b })
	var s Seat
	g.Join("", &s, member{id: 1})
	b := <-closed
	assert.Len(t, b.Begin(), 1)
	b.Finish(nil)
}

// Without a wait, a group's batch closes when its last member on the way
// joins or leaves, not before.
func TestABatchWithoutAWaitClosesWhenItsGroupHasArrived(t *testing.T) {
	closed := make(chan *Batch[member], 1)
	g := New(Options{MaxItems: 10}, func(b *Batch[member]) { closed <- b })
	gr := g.NewGroup(3)
	var a, b, c Seat
	a.Sit(gr)
	b.Sit(gr)
	c.Sit(gr)
	g.Join("", &a, member{id: 1})
	c.Leave() // waits for something: not waited for
	assert.Empty(t, closed)
	g.Join("", &b, member{id: 2})
	batch := <-closed
	assert.Len(t, batch.Begin(), 2)
	batch.Finish(nil)
	// c comes back later: its group has nobody on the way, so it is
	// called at once, alone.
	g.Join("", &c, member{id: 3})
	late := <-closed
	assert.Len(t, late.Begin(), 1)
	late.Finish(nil)
}

// Without a MaxWait, GroupWait bounds the wait for a member still on its
// way: the batch closes with those that came.
func TestGroupWaitBoundsTheWaitForAStraggler(t *testing.T) {
	closed := make(chan *Batch[member], 1)
	g := New(Options{MaxItems: 10, GroupWait: 20 * time.Millisecond}, func(b *Batch[member]) { closed <- b })
	gr := g.NewGroup(2)
	var a, stuck Seat
	a.Sit(gr)
	stuck.Sit(gr)
	g.Join("", &a, member{id: 1})
	b := <-closed
	assert.Len(t, b.Begin(), 1, "closed without the member still on its way")
	b.Finish(nil)
	stuck.Leave()
}
