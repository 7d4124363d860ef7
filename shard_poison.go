package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The poison queues of a sharded queue sit beside its shards: shard
// "tasks-3" has "tasks-3-poison" in the same account. Poison capacity so
// grows with the shards, a poison move stays in the account the message
// came from (one account failing does not stop the others' poison moves),
// and a requeued message goes back to its own shard, keeping the affinity
// of keyed sends.

// originTTL is how long a received message's shard is remembered for poison
// routing. A message held longer than this and then poisoned is still
// poisoned, only into another shard's poison queue.
const originTTL = time.Hour

// PoisonQueue is where a listener on s moves messages it gives up on: a
// sharded queue over the shards' own poison queues ("<shard>-poison" in the
// shard's account). A message is poisoned into its own shard's poison queue
// while that is healthy, and into another one otherwise. A receive from it
// asks every shard before it reports none, so Requeue(ctx, s.PoisonQueue(),
// s, nil) moves everything back, spread round-robin; s.Requeue puts each
// message back on its own shard. It is nil unless every shard has a default
// poison queue (a *Queue of an Account does).
func (s *ShardedQueue) PoisonQueue() *ShardedQueue {
	p := s.set.poisonSet()
	if p == nil {
		return nil
	}
	s.set.tracking.Store(true)
	return p.view(s.members)
}

// poisonSet builds the set of the shards' poison queues once.
func (set *shardSet) poisonSet() *shardSet {
	set.poisonOnce.Do(func() {
		shards := make([]Shard, len(set.shards))
		for i, sh := range set.shards {
			pq, ok := sh.(interface{ PoisonQueue() *Queue })
			if !ok {
				return
			}
			q := pq.PoisonQueue()
			if q == nil {
				return
			}
			shards[i] = q
		}
		p := newShardSet(set.name+poisonSuffix, shards, set.opts)
		p.exhaustive, p.parent = true, set
		set.poison = p
	})
	return set.poison
}

// sendToOrigin sends a poison envelope to the poison shard beside the shard
// its message came from. done is false when that shard is unknown or
// unavailable, and the caller spreads the send instead.
func (s *ShardedQueue) sendToOrigin(ctx context.Context, parent *shardSet, text string, opts *SendOptions) (id string, done bool, err error) {
	env, perr := ParsePoison(text)
	if perr != nil {
		return "", false, nil
	}
	i, ok := parent.origins.lookup(env.MessageID)
	if !ok || !s.set.available(i, s.set.now()) {
		return "", false, nil
	}
	id, err = s.set.shards[i].Send(ctx, text, opts)
	s.set.record(ctx, i, err)
	if f, _ := fault(ctx, err); f {
		return "", false, nil // route around it, as any send would
	}
	return id, true, err
}

// Requeue moves the envelopes in each shard's poison queue back to that
// shard (see the package function Requeue), so keyed messages return to
// their key's shard. It goes on past a shard that fails, and returns the
// totals with the failures joined. Max in opts bounds the total.
func (s *ShardedQueue) Requeue(ctx context.Context, opts *RequeueOptions) (RequeueResult, error) {
	p := s.set.poisonSet()
	if p == nil {
		return RequeueResult{}, fmt.Errorf("azdispatch: sharded queue %q: its shards have no poison queues", s.set.name)
	}
	var o RequeueOptions
	if opts != nil {
		o = *opts
	}
	var total RequeueResult
	var errs []error
	for _, i := range s.members {
		one := o
		if o.Max > 0 {
			if total.Moved >= o.Max {
				break
			}
			one.Max = o.Max - total.Moved
		}
		res, err := Requeue(ctx, p.shards[i], s.set.shards[i], &one)
		total.Moved += res.Moved
		total.Skipped += res.Skipped
		total.Invalid += res.Invalid
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %q: %w", s.set.shards[i].Name(), err))
		}
	}
	return total, errors.Join(errs...)
}

// originMap remembers which shard each message in flight came from, for the
// poison move: the listener poisons with the envelope alone, and the
// envelope holds the message ID. Entries go when the message is deleted;
// those of messages released and received elsewhere are pruned after
// originTTL.
type originMap struct {
	mu      sync.Mutex
	m       map[string]origin
	pruneAt int
}

type origin struct {
	shard int
	seen  time.Time
}

func (o *originMap) remember(batch []*Delivery, shard int, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m, o.pruneAt = make(map[string]origin), 4096
	}
	for _, d := range batch {
		o.m[d.ID] = origin{shard: shard, seen: now}
	}
	if len(o.m) >= o.pruneAt {
		for id, e := range o.m {
			if now.Sub(e.seen) > originTTL {
				delete(o.m, id)
			}
		}
		o.pruneAt = max(4096, 2*len(o.m))
	}
}

func (o *originMap) lookup(id string) (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.m[id]
	return e.shard, ok
}

func (o *originMap) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
}
