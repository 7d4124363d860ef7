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
		k := max
		if c.Limit > 0 {
			k = min(k, c.Limit)
		}
		p.Read(order, map[int]bool{c.Index: true}, map[int]int{c.Index: k}, now)
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
		p.Read(order, map[int]bool{0: true}, map[int]int{0: 1}, t0)
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
	p.Read(order, map[int]bool{0: true}, map[int]int{0: 32}, t0.Add(30*time.Second))
	later := t0.Add(time.Minute)
	order, _ = p.Arrange(later, warm(3))
	// 1 and 2 have waited a minute since their first chance, as long as
	// each other: by level among them; then 0, read 30 s ago.
	assert.Equal(t, []int{1, 2, 0}, indexes(order))
	p.Read(order, map[int]bool{1: true}, map[int]int{1: 1}, later)
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

// A queue's cap bounds its messages in hand across receives made at once,
// and a queue passed over at its cap is reported once it has room.
func TestCapsHoldAcrossReceivesMadeAtOnce(t *testing.T) {
	p := New(Fair, 0, []Member{{Cap: 3}})
	a, capped := p.Arrange(t0, warm(1))
	require.False(t, capped)
	assert.Equal(t, 3, a[0].Limit)
	b, capped := p.Arrange(t0, warm(1)) // made while a is under way
	assert.True(t, capped)
	assert.Empty(t, b)
	// Read gives back the room a did not use, which b found taken: that
	// it has room again is reported.
	assert.True(t, p.Read(a, map[int]bool{0: true}, map[int]int{0: 2}, t0))
	assert.Equal(t, 2, p.Counts()[0].InHand)
	c, _ := p.Arrange(t0, warm(1))
	assert.Equal(t, 1, c[0].Limit)
	assert.False(t, p.Read(c, map[int]bool{0: true}, map[int]int{0: 1}, t0))
	assert.True(t, p.Done(0), "read up to its cap: room again is reported")
	assert.False(t, p.Done(0), "once")
}

// Randomized: whatever the order of arranges, reads and lets-go, no queue
// ever has more in hand than its cap, and in hand never goes negative.
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
	type pending struct{ order []Candidate }
	var open []pending
	for range 20000 {
		switch rng.IntN(3) {
		case 0:
			order, _ := p.Arrange(t0, warm(len(caps)))
			open = append(open, pending{order})
		case 1:
			if len(open) == 0 {
				continue
			}
			k := rng.IntN(len(open))
			r := open[k]
			open = append(open[:k], open[k+1:]...)
			got := map[int]int{}
			asked := map[int]bool{}
			for _, c := range r.order {
				n := rng.IntN(4)
				if c.Limit > 0 {
					n = min(n, c.Limit)
				}
				got[c.Index], asked[c.Index] = n, true
				held[c.Index] += n
			}
			p.Read(r.order, asked, got, t0)
		case 2:
			i := rng.IntN(len(caps))
			if held[i] > 0 {
				held[i]--
				p.Done(i)
			}
		}
		for i, c := range p.Counts() {
			require.GreaterOrEqual(t, c.InHand, held[i])
			if caps[i] > 0 {
				require.LessOrEqual(t, held[i], caps[i], "queue %d", i)
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
