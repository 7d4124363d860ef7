package dashboard

import (
	"context"
	"sort"

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
	// read and readPoison are what the overview reads queue and poison
	// through: for a shard of a sharded queue, a view of that one shard,
	// so that each request is bounded by the set's TryTimeout and what it
	// finds counts in the shard's health (a shard that does not answer is
	// backed off, and named, even in a dashboard that runs alone); the
	// queues themselves otherwise.
	read, readPoison azdispatch.Shard
}

// set is one source as the user gave it: a queue, or a sharded set.
type set struct {
	name    string
	source  azdispatch.Shard
	sharded *azdispatch.ShardedQueue // nil for a single queue
	units   []*unit
}

// topology is what the sources are made of, found once in New.
type topology struct {
	sets     []*set
	units    []*unit
	accounts []*azdispatch.Account
	// counted are the queues with a transaction count of their own and no
	// account (a memqueue.Queue): the cost page adds their counts.
	counted []transactor
	store   *azdispatch.PayloadStore
}

// Interfaces of the library's concrete types, looked for on sources so
// that a stand-in (memqueue) works too.
type (
	sharder    interface{ Shards() []azdispatch.Shard }
	accounter  interface{ Account() *azdispatch.Account }
	transactor interface {
		Transactions() azdispatch.Transactions
	}
	peeker interface {
		Peek(ctx context.Context, max int) ([]*azdispatch.Delivery, error)
	}
)

func newTopology(o *Options) *topology {
	t := &topology{store: o.Payloads}
	seenAccount := map[*azdispatch.Account]bool{}
	seenCounted := map[transactor]bool{}
	addUnit := func(s *set, q azdispatch.Shard) {
		u := &unit{name: q.Name(), queue: q, read: q}
		if s.isSharded() {
			u.set = s.name
		}
		if pq, ok := q.(azdispatch.PoisonQueuer); ok {
			u.poison = pq.PoisonQueue()
		}
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
		if a, ok := q.(accounter); ok {
			u.account = a.Account()
		}
		switch {
		case u.account != nil:
			if !seenAccount[u.account] {
				seenAccount[u.account] = true
				t.accounts = append(t.accounts, u.account)
			}
		default:
			for _, c := range []azdispatch.Shard{u.queue, u.poison} {
				if tc, ok := c.(transactor); ok && !seenCounted[tc] {
					seenCounted[tc] = true
					t.counted = append(t.counted, tc)
				}
			}
		}
		s.units = append(s.units, u)
		t.units = append(t.units, u)
	}
	for _, src := range o.Sources {
		s := &set{name: src.Name(), source: src}
		if sq, ok := src.(*azdispatch.ShardedQueue); ok {
			s.sharded = sq
		}
		if sh, ok := src.(sharder); ok {
			// A sharded source of another kind shows its shards too,
			// without health.
			for _, q := range sh.Shards() {
				addUnit(s, q)
			}
		} else {
			addUnit(s, src)
		}
		t.sets = append(t.sets, s)
		if t.store == nil {
			if ps, ok := src.(azdispatch.PayloadStorer); ok {
				t.store = ps.PayloadStore()
			}
		}
	}
	sort.SliceStable(t.accounts, func(i, j int) bool { return t.accounts[i].Name() < t.accounts[j].Name() })
	return t
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
	_, ok := s.source.(sharder)
	return ok
}
