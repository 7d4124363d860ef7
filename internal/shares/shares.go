// Package shares decides which queue of a set a receive reads first: by
// level (strict, with aging), by weight (weighted fair queueing of
// messages received), or in equal shares, under a cap per queue on the
// messages in hand. It keeps what that needs (messages in hand and served
// per queue, when each was last read) and makes no request itself.
package shares

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

// Mode is how receives are shared among the queues.
type Mode int

const (
	// Fair gives every queue that has messages an equal share of the
	// messages received.
	Fair Mode = iota
	// Weighted gives each queue that has messages a share of the messages
	// received in proportion to its weight.
	Weighted
	// Strict reads the queues in their order, the first first, reading a
	// later one only when those before it had none, except that a queue not
	// read for the aging time is read first.
	Strict
)

// Member is one queue's settings.
type Member struct {
	Weight int // Weighted: its share, at least 1
	Cap    int // the most of its messages in hand at once; 0: no cap
}

// Candidate is a queue a receive may read: its index; whether it may hold
// messages (it had some at its last look); whether it rests after an
// empty look, to be asked only if no other queue answers; and, once
// arranged, the most it may bring (0: no limit of its own).
type Candidate struct {
	Index   int
	Warm    bool
	Resting bool
	Limit   int
}

// Count is one queue's figures.
type Count struct {
	InHand   int   // received and not yet let go (reads under way not counted)
	Received int64 // messages received, in all
	LastRead time.Time
}

// Policy shares the receives of one set. It is safe for concurrent use.
type Policy struct {
	mode  Mode
	aging time.Duration

	mu      sync.Mutex
	members []Member
	counts  []Count
	// served is each queue's messages received over its weight, the
	// virtual time of weighted fair queueing; a queue that had none is
	// brought up to the least of those that had, so that it comes back
	// with an equal claim, not with credit saved while it was empty.
	served []float64
	// looked is when each queue was last read, or first had the chance:
	// Strict's aging counts from it.
	looked []time.Time
	// reserved is each queue's room taken by reads under way (see Take).
	reserved []int
	// passedOver is set for a queue a receive left out at its cap, or
	// read up to it, until it is below its cap again: a listener that
	// found nothing else is then told to come back for it.
	passedOver []bool
}

// New returns the policy of a set of members, in their order. aging is
// Strict's: a queue not read for that long is read first.
func New(mode Mode, aging time.Duration, members []Member) *Policy {
	p := &Policy{mode: mode, aging: aging, members: slices.Clone(members),
		counts: make([]Count, len(members)), served: make([]float64, len(members)), looked: make([]time.Time, len(members)), passedOver: make([]bool, len(members)), reserved: make([]int, len(members))}
	for i := range p.members {
		p.members[i].Weight = max(p.members[i].Weight, 1)
	}
	return p
}

// Arrange orders the candidates of a receive, those not resting and then
// those resting, each group in the policy's order, and leaves out queues
// at their cap. It reports whether it left any out for their caps. A
// receive then asks the queues in this order, each by Take and Got.
func (p *Policy) Arrange(now time.Time, in []Candidate) (out []Candidate, capped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out = make([]Candidate, 0, len(in))
	for _, c := range in {
		if room, limited := p.room(c.Index); limited {
			if room <= 0 {
				capped = true
				p.passedOver[c.Index] = true
				continue
			}
			c.Limit = room
		}
		out = append(out, c)
	}
	p.catchUp(out)
	for _, c := range out {
		if p.looked[c.Index].IsZero() {
			p.looked[c.Index] = now // aging counts from its first chance
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if a.Resting != b.Resting {
			if b.Resting {
				return -1
			}
			return 1
		}
		return p.compare(now, a, b)
	})
	return out, capped
}

// room is how many more messages queue i may have in hand, and whether it
// has a cap at all. Hold p.mu.
func (p *Policy) room(i int) (int, bool) {
	cap := p.members[i].Cap
	return cap - p.counts[i].InHand - p.reserved[i], cap > 0
}

// Take reserves queue i's room for a read about to be made, so that a read
// made meanwhile does not count it twice: the most the read may bring (0:
// the queue has no cap), and false if it has no room now (it is then
// passed over). Got gives the reservation back, as soon as the read is
// over.
func (p *Policy) Take(i int) (limit int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	room, limited := p.room(i)
	switch {
	case !limited:
		return 0, true
	case room <= 0:
		p.passedOver[i] = true
		return 0, false
	}
	p.reserved[i] += room
	return room, true
}

// Got records what the read of queue i, which Take let bring up to limit
// (0: no cap), brought: n messages, and whether the queue answered. It
// gives back the reservation, and reports whether a queue passed over at
// its cap has room again, so that a listener that found nothing else
// comes back for it.
func (p *Policy) Got(i, limit, n int, answered bool, now time.Time) (room bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.counts[i]
	c.InHand += n
	c.Received += int64(n)
	p.served[i] += float64(n)
	if answered {
		c.LastRead = now
		p.looked[i] = now
	}
	if limit == 0 {
		return false
	}
	p.reserved[i] -= limit
	if n >= limit {
		// Its cap, not the queue, ended the read: it may hold more, which
		// a listener that took the short receive for "no more" comes back
		// for once there is room.
		p.passedOver[i] = true
	}
	return p.roomAgain(i)
}

// compare orders candidates a and b: in Strict mode by level, except that
// a queue not read for the aging time goes before every level, the one
// waiting longest first; otherwise a queue due for a look after an empty
// one first (a request per its rest, so that it is not passed over for as
// long as others have messages), then by virtual time, the least first.
func (p *Policy) compare(now time.Time, a, b Candidate) int {
	i, j := a.Index, b.Index
	if p.mode != Strict {
		if a.Warm != b.Warm {
			if b.Warm {
				return -1
			}
			return 1
		}
		return cmp.Compare(p.served[i]/float64(p.members[i].Weight), p.served[j]/float64(p.members[j].Weight))
	}
	agedI, agedJ := p.aged(now, i), p.aged(now, j)
	switch {
	case agedI && agedJ:
		return p.looked[i].Compare(p.looked[j])
	case agedI:
		return -1
	case agedJ:
		return 1
	}
	return cmp.Compare(i, j)
}

// aged reports whether queue i has waited the aging time for a read.
func (p *Policy) aged(now time.Time, i int) bool {
	return p.aging > 0 && now.Sub(p.looked[i]) >= p.aging
}

// catchUp brings each queue that is not among the warm candidates up to
// the least virtual time of those that are.
func (p *Policy) catchUp(cands []Candidate) {
	least := math.Inf(1)
	for _, c := range cands {
		if c.Warm {
			least = min(least, p.served[c.Index]/float64(p.members[c.Index].Weight))
		}
	}
	if math.IsInf(least, 1) {
		return
	}
	warm := make(map[int]bool, len(cands))
	for _, c := range cands {
		warm[c.Index] = c.Warm
	}
	for i := range p.served {
		if !warm[i] {
			p.served[i] = max(p.served[i], least*float64(p.members[i].Weight))
		}
	}
}

// Done records that a message of queue i is no longer in hand, and
// reports whether a queue passed over at its cap has room again, so that a
// listener that found nothing else comes back for it.
func (p *Policy) Done(i int) (belowCap bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.counts[i]
	if c.InHand == 0 {
		return false // not counted: a delivery let go twice is let go once
	}
	c.InHand--
	return p.roomAgain(i)
}

// roomAgain reports, once, that queue i, passed over at its cap, has room.
func (p *Policy) roomAgain(i int) bool {
	if room, _ := p.room(i); !p.passedOver[i] || room <= 0 {
		return false
	}
	p.passedOver[i] = false
	return true
}

// Carry gives queue to of p what queue from of prev counted: in hand,
// received, served, last read. A set whose queues change carries each
// that stays over; no read may be under way in prev (none has a
// reservation).
func (p *Policy) Carry(to int, prev *Policy, from int) {
	prev.mu.Lock()
	c, served, looked, passed := prev.counts[from], prev.served[from], prev.looked[from], prev.passedOver[from]
	prev.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[to], p.served[to], p.looked[to], p.passedOver[to] = c, served, looked, passed
}

// Counts returns each queue's figures, in order.
func (p *Policy) Counts() []Count {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.counts)
}
