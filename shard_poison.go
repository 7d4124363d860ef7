package azdispatch

import (
	"context"
	"errors"
	"fmt"
)

// The poison queues of a sharded queue sit beside its shards: shard
// "tasks-3" has "tasks-3-poison" in the same account. Poison capacity so
// grows with the shards, a poison move stays in the account the message
// came from (one account failing does not stop the others' poison moves),
// and a requeued message goes back to its own shard, keeping the affinity
// of keyed sends.

// PoisonQueue is where a listener on s moves messages it gives up on: a
// sharded queue over the shards' own poison queues ("<shard>-poison" in the
// shard's account). A message is poisoned into its own shard's poison queue
// while that is healthy, and into another one otherwise. A receive from it
// asks every shard before it reports none, so Requeue(ctx, s.PoisonQueue(),
// s, nil) moves everything back, spread round-robin; s.Requeue puts each
// message back on its own shard. It is nil unless every shard has a default
// poison queue (see PoisonQueuer).
func (s *ShardedQueue) PoisonQueue() *ShardedQueue {
	p := s.set.poisonSet()
	if p == nil {
		return nil
	}
	return p.view(s.members)
}

// PoisonShard implements PoisonQueuer: it is PoisonQueue as a Shard.
func (s *ShardedQueue) PoisonShard() Shard {
	if p := s.PoisonQueue(); p != nil {
		return p
	}
	return nil // not a nil *ShardedQueue in a non-nil Shard
}

// poisonSet builds the set of the shards' poison queues once.
func (set *shardSet) poisonSet() *shardSet {
	set.poisonOnce.Do(func() {
		shards := make([]Shard, len(set.shards))
		for i, sh := range set.shards {
			pq, ok := sh.(PoisonQueuer)
			if !ok {
				return
			}
			q := pq.PoisonShard()
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

// sendBeside puts a poison envelope into the poison queue beside the shard
// its message came through, which origin (the message's receipt as
// received) names: the listener's poison move calls it. When that is not
// known (the message came from elsewhere) or the shard is backed off or
// fails, the envelope is spread as any send is.
func (s *ShardedQueue) sendBeside(ctx context.Context, origin any, text string, opts *SendOptions) (string, error) {
	if r, ok := origin.(*shardReceipt); ok && r.set == s.set.parent && s.set.available(r.index, s.set.now()) {
		id, err := s.set.shards[r.index].Send(ctx, text, opts)
		s.set.record(ctx, r.index, err)
		if f, _ := fault(ctx, err); !f {
			return id, err
		}
	}
	return s.Send(ctx, text, opts)
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
		total.Duplicates += res.Duplicates
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %q: %w", s.set.shards[i].Name(), err))
		}
	}
	return total, errors.Join(errs...)
}
