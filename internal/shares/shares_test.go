package shares

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// warm is every queue of n, each warm.
func warm(n int) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Index: i, Warm: true}
	}
	return out
}

// serve simulates receives of up to max messages from always-full queues:
// each takes from the first arranged candidate, within its limit.
func serve(p *Policy, n, receives, max int, now time.Time) []int64 {
	for range receives {
		order, _ := p.Arrange(now, warm(n))
		if len(order) == 0 {
			continue
		}
		c := order[0]
		limit, ok := p.Take(c.Index)
		if !ok {
			continue
		}
		k := max
		if limit > 0 {
			k = min(k, limit)
		}
		p.Got(c.Index, limit, k, true, now)
		for range k {
			p.Done(c.Index)
		}
	}
	out := make([]int64, n)
	for i, c := range p.Counts() {
		out[i] = c.Received
	}
	return out
}

// Saturated queues are served in proportion to their weights, whatever
// the receive size.
func TestWeightedSharesFollowTheWeights(t *testing.T) {
	for _, max := range []int{1, 3, 32} {
		p := New(Weighted, 0, []Member{{Weight: 1}, {Weight: 2}, {Weight: 5}})
		got := serve(p, 3, 4000, max, t0)
		total := float64(got[0] + got[1] + got[2])
		for i, w := range []float64{1, 2, 5} {
			assert.InDelta(t, w/8, float64(got[i])/total, 0.01, "max %d, queue %d: %v", max, i, got)
		}
	}
}

// A queue that was empty comes back with an equal claim, not with the
// credit of the time it had nothing: it does not take every receive until
// it has caught up.
func TestAQueueBackFromEmptyGetsNoSavedCredit(t *testing.T) {
	p := New(Fair, 0, []Member{{}, {}})
	// Queue 1 empty (resting) while queue 0 is served 1,000.
	for range 1000 {
		order, _ := p.Arrange(t0, []Candidate{{Index: 0, Warm: true}, {Index: 1, Resting: true}})
		require.Equal(t, 0, order[0].Index)
		p.Got(0, 0, 1, true, t0)
		p.Done(0)
	}
	// Both now full: they alternate from the start.
	got := serve(p, 2, 100, 1, t0)
	assert.InDelta(t, 1000+50, got[0], 1)
	assert.InDelta(t, 50, got[1], 1)
}

// Strict reads by level, and a level not read for the aging time first.
func TestStrictReadsByLevelAndAgesTheOthers(t *testing.T) {
	p := New(Strict, time.Minute, []Member{{}, {}, {}})
	order, _ := p.Arrange(t0, warm(3))
	assert.Equal(t, []int{0, 1, 2}, indexes(order))
	p.Got(0, 0, 32, true, t0.Add(30*time.Second))
	later := t0.Add(time.Minute)
	order, _ = p.Arrange(later, warm(3))
	// 1 and 2 have waited a minute since their first chance, as long as
	// each other: by level among them; then 0, read 30 s ago.
	assert.Equal(t, []int{1, 2, 0}, indexes(order))
	p.Got(1, 0, 1, true, later)
	order, _ = p.Arrange(later, warm(3))
	assert.Equal(t, []int{2, 0, 1}, indexes(order))
}

// Resting queues go after the rest, whatever their order; among the
// others, under shares, one due for a look after an empty one goes first.
func TestRestingQueuesGoLast(t *testing.T) {
	p := New(Strict, 0, []Member{{}, {}})
	order, _ := p.Arrange(t0, []Candidate{{Index: 0, Resting: true}, {Index: 1, Warm: true}})
	assert.Equal(t, []int{1, 0}, indexes(order))
	f := New(Fair, 0, []Member{{}, {}, {}})
	order, _ = f.Arrange(t0, []Candidate{{Index: 0, Resting: true}, {Index: 1, Warm: true}, {Index: 2}})
	assert.Equal(t, []int{2, 1, 0}, indexes(order))
}

// A queue's cap bounds its messages in hand across reads made at once: a
// read takes the room just before it is made and gives back what it did
// not use as soon as it is over; a queue passed over at its cap is
// reported once it has room.
func TestCapsHoldAcrossReadsMadeAtOnce(t *testing.T) {
	p := New(Fair, 0, []Member{{Cap: 3}})
	order, capped := p.Arrange(t0, warm(1))
	require.False(t, capped)
	assert.Equal(t, 3, order[0].Limit, "the room now")
	limit, ok := p.Take(0)
	require.True(t, ok)
	assert.Equal(t, 3, limit)
	_, ok = p.Take(0) // a read made while the first is under way
	assert.False(t, ok, "no room left: passed over")
	assert.Zero(t, p.Counts()[0].InHand, "a reservation is not in hand")
	// The first read brings 2 of its 3: the one left is room again, and
	// the read passed over is told.
	assert.True(t, p.Got(0, limit, 2, true, t0))
	assert.Equal(t, 2, p.Counts()[0].InHand)
	limit, ok = p.Take(0)
	require.True(t, ok)
	assert.Equal(t, 1, limit)
	assert.False(t, p.Got(0, limit, 1, true, t0), "at its cap")
	assert.True(t, p.Done(0), "read up to its cap: room again is reported")
	assert.False(t, p.Done(0), "once")
	order, capped = p.Arrange(t0, warm(1))
	assert.False(t, capped)
	assert.Equal(t, 2, order[0].Limit)
}

// A queue at its cap is left out of the order, and reported.
func TestArrangeLeavesOutAQueueAtItsCap(t *testing.T) {
	p := New(Fair, 0, []Member{{Cap: 1}, {}})
	limit, ok := p.Take(0)
	require.True(t, ok)
	p.Got(0, limit, 1, true, t0)
	order, capped := p.Arrange(t0, warm(2))
	assert.True(t, capped)
	assert.Equal(t, []int{1}, indexes(order))
	assert.True(t, p.Done(0))
}

// Randomized: whatever the order of takes, reads and lets-go, no queue ever
// has more in hand than its cap, reservations included, and in hand never
// goes negative.
func TestCapsNeverExceededRandomized(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	caps := []int{1, 2, 5, 0}
	members := make([]Member, len(caps))
	for i, c := range caps {
		members[i] = Member{Cap: c}
	}
	p := New(Fair, 0, members)
	held := make([]int, len(caps))
	type read struct{ i, limit int }
	var open []read
	for range 20000 {
		switch rng.IntN(3) {
		case 0:
			i := rng.IntN(len(caps))
			if limit, ok := p.Take(i); ok {
				open = append(open, read{i, limit})
			}
		case 1:
			if len(open) == 0 {
				continue
			}
			k := rng.IntN(len(open))
			r := open[k]
			open = append(open[:k], open[k+1:]...)
			n := rng.IntN(4)
			if r.limit > 0 {
				n = min(n, r.limit)
			}
			held[r.i] += n
			p.Got(r.i, r.limit, n, true, t0)
		case 2:
			i := rng.IntN(len(caps))
			if held[i] > 0 {
				held[i]--
				p.Done(i)
			}
		}
		for i, c := range p.Counts() {
			require.Equal(t, held[i], c.InHand)
			if caps[i] > 0 {
				reserved := 0
				for _, r := range open {
					if r.i == i {
						reserved += r.limit
					}
				}
				require.LessOrEqual(t, held[i]+reserved, caps[i], "queue %d", i)
			}
		}
	}
}

func indexes(cs []Candidate) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.Index
	}
	return out
}
