package dashboard

import (
	"sort"
	"time"

	"github.com/azdispatch/azdispatch"
)

// unit is one queue the dashboard reads: a queue of its own, or one shard
// of a sharded set, with the poison queue beside it.
type unit struct {
	name    string
	set     string // the sharded set it belongs to; "" for a queue of its own
	queue   azdispatch.Shard
	poison  azdispatch.Shard // nil when it has none
	account *azdispatch.Account
	// caps and poisonCaps are what queue and poison can do, read once.
	caps, poisonCaps azdispatch.Capabilities
	// read and readPoison are what the overview reads queue and poison
	// through: for a shard of a sharded queue, a view of that one shard,
	// so that each request is bounded by the set's TryTimeout and what it
	// finds counts in the shard's health (a shard that does not answer is
	// backed off, and named, even in a dashboard that runs alone); the
	// queues themselves otherwise.
	read, readPoison azdispatch.Shard
}

// set is one source as the user gave it: a queue, a sharded set, or a
// queue set.
type set struct {
	name    string
	source  azdispatch.Source
	caps    azdispatch.Capabilities  // what source can do, read once
	sharded *azdispatch.ShardedQueue // nil unless a sharded queue
	// health is the set's own view of its queues' health; nil for a
	// single queue, or a set of another kind that does not report it.
	health func() []azdispatch.ShardHealth
	// shares are a queue set's queues as it sees them; nil for any other.
	shares func() []azdispatch.SetQueueState
	units  []*unit
}

// topology is what the sources are made of, found once in New.
type topology struct {
	sets     []*set
	units    []*unit
	accounts []*azdispatch.Account
	// counted are the queues with a transaction count of their own and no
	// account (a memqueue.Queue): the cost page adds their counts.
	counted []func() azdispatch.Transactions
	store   *azdispatch.PayloadStore
	// pausable are what the pause and resume actions act on, by name.
	pausable map[string]*pauseTarget
	// storeTime is the service's time as the store's account (or else
	// the first source that can tell) knows it: a schedule's pause ends
	// by it. Nil when no source can tell.
	storeTime func() time.Time
}

func newTopology(o *Options) *topology {
	t := &topology{store: o.Payloads}
	seenAccount := map[*azdispatch.Account]bool{}
	seenCounted := map[azdispatch.Shard]bool{}
	addUnit := func(s *set, q azdispatch.Shard) {
		u := &unit{name: q.Name(), queue: q, read: q, caps: azdispatch.CapabilitiesOf(q)}
		if s.isSharded() {
			u.set = s.name
		}
		if u.caps.PoisonQueue != nil {
			u.poison = u.caps.PoisonQueue()
		}
		u.poisonCaps = azdispatch.CapabilitiesOf(u.poison)
		u.readPoison = u.poison
		if sq := s.sharded; sq != nil {
			k, n := len(s.units), len(sq.Shards())
			if view, err := sq.Subset(k, n); err == nil {
				u.read = view
			}
			if pq, ok := sq.PoisonQueue().(*azdispatch.ShardedQueue); ok && u.poison != nil {
				if view, err := pq.Subset(k, n); err == nil {
					u.readPoison = view
				}
			}
		}
		if u.caps.Account != nil {
			u.account = u.caps.Account()
		}
		switch {
		case u.account != nil:
			if !seenAccount[u.account] {
				seenAccount[u.account] = true
				t.accounts = append(t.accounts, u.account)
			}
		default:
			for _, c := range []struct {
				q    azdispatch.Shard
				caps azdispatch.Capabilities
			}{{u.queue, u.caps}, {u.poison, u.poisonCaps}} {
				if c.caps.Transactions != nil && !seenCounted[c.q] {
					seenCounted[c.q] = true
					t.counted = append(t.counted, c.caps.Transactions)
				}
			}
		}
		s.units = append(s.units, u)
		t.units = append(t.units, u)
	}
	for _, src := range o.Sources {
		s := &set{name: src.Name(), source: src, caps: azdispatch.CapabilitiesOf(src)}
		if sq, ok := src.(*azdispatch.ShardedQueue); ok {
			s.sharded = sq
		}
		if h, ok := src.(interface {
			Health() []azdispatch.ShardHealth
		}); ok {
			s.health = h.Health
		}
		if qs, ok := src.(*azdispatch.QueueSet); ok {
			s.shares = qs.State
		}
		if s.isSharded() {
			// A sharded source of another kind shows its shards too,
			// without health.
			for _, q := range s.caps.Shards() {
				addUnit(s, q)
			}
		} else {
			addUnit(s, src.(azdispatch.Shard)) // checked by withDefaults
		}
		t.sets = append(t.sets, s)
		if t.store == nil {
			if s.caps.PayloadStore != nil {
				t.store = s.caps.PayloadStore()
			}
		}
	}
	sort.SliceStable(t.accounts, func(i, j int) bool { return t.accounts[i].Name() < t.accounts[j].Name() })
	t.pausable = pauseTargets(t.sets)
	t.storeTime = storeClock(t)
	return t
}

// storeClock is the service's time as known by a source whose payload
// store is the one the dashboard shows (an account's queues and blobs
// share one clock), or else by the first source that can tell.
func storeClock(t *topology) func() time.Time {
	var first func() time.Time
	for _, s := range t.sets {
		if s.caps.ServiceTime == nil {
			continue
		}
		if first == nil {
			first = s.caps.ServiceTime
		}
		if s.caps.PayloadStore != nil && s.caps.PayloadStore() == t.store {
			return s.caps.ServiceTime
		}
	}
	return first
}

// unitByPoison finds the unit whose poison queue is named name.
func (t *topology) unitByPoison(name string) *unit {
	for _, u := range t.units {
		if u.poison != nil && u.poison.Name() == name {
			return u
		}
	}
	return nil
}

// unitByName finds a queue (or shard) by name.
func (t *topology) unitByName(name string) *unit {
	for _, u := range t.units {
		if u.name == name {
			return u
		}
	}
	return nil
}

// isSharded says whether s is a sharded set, of the library's or another kind.
func (s *set) isSharded() bool {
	return s.caps.Shards != nil
}
