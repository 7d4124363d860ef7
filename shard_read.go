package azdispatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Receive gets up to max messages: from the next shard, round-robin, that
// is healthy and not known to be empty, and, if that one had fewer than max,
// from the next shards that had messages at their last look, until max are
// gathered. A partial batch thus means what it means for one queue (there
// was no more just now, anywhere it was worth looking), so a listener that
// pauses after one does not leave messages waiting on other shards. A busy
// sharded queue does not stall on an empty shard, and an idle one makes one
// request per call, as one queue would.
//
// Shards that were empty at their last look are passed over for
// ShardedQueueOptions.EmptySkip; when all are, the one looked at longest ago is
// asked. So on an idle queue, whose listener calls Receive every maxIdle
// (30 s by default), calls go round the k shards one at a time: a message
// that arrives alone on one shard is received within k·maxIdle (5 minutes
// for 10 shards at the defaults), while messages sent round-robin, which
// land on every shard, are found at the next call. A message found resets
// the listener's idle back-off, and the shards are then read in quick turn.
//
// A listener's receive for messages it knows are due again (released for a
// retry, or left hidden by a request that failed) asks every shard that is
// not backed off, however recently it was found empty: they may be on any.
//
// Each failing shard is backed off and the next one asked, until messages
// are in hand: then they are returned at once, a partial batch, rather than
// held (hidden, their visibility running) while more shards are tried. It
// fails with ErrNoHealthyShard only when no shard answered.
func (s *ShardedQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error) {
	// Checked here so that a bad argument is not taken for a shard's failure.
	if err := checkReceive(max, visibility); err != nil {
		return nil, err
	}
	now := s.set.now()
	look := lookingForDue(ctx)
	if look != nil {
		s.unasked(look, now)
	}
	order := s.readOrder(now, look != nil)
	var errs []error
	var got []*Delivery
	answered := false
	for _, c := range order {
		if answered && !c.warm && !s.set.exhaustive && look == nil {
			continue // known empty a moment ago: not worth a request now
		}
		batch, err := s.set.receiveFrom(ctx, c.index, max-len(got), visibility)
		got = append(got, batch...) // a shard may fail after bringing some
		if err != nil {
			errs = append(errs, err)
			if len(got) > 0 || ctx.Err() != nil {
				// Messages in hand are already hidden, their visibility
				// running: return them rather than try more shards.
				break
			}
			continue
		}
		answered = true
		if len(got) >= max {
			break
		}
	}
	if answered {
		return got, nil
	}
	// Messages a failing shard brought are returned with its error: they
	// are hidden already, and a listener handles them all the same.
	return got, s.noHealthy("receive", errs, now)
}

// readCandidate is a shard a receive may ask, and whether it may hold
// messages (it had some at its last look, or was never looked at).
type readCandidate struct {
	index int
	warm  bool
}

// readOrder lists the shards a receive may ask, in round-robin order from
// where the last receive started: the healthy ones that are warm or whose
// EmptySkip has passed (every healthy one if all is set); if there are
// none, the healthy one looked at longest ago. The next receive starts
// after the first one listed.
func (s *ShardedQueue) readOrder(now time.Time, all bool) []readCandidate {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	set := s.set
	set.mu.Lock()
	defer set.mu.Unlock()
	n := len(s.members)
	var out []readCandidate
	first, fallback, fallbackPos := -1, -1, -1
	for k := range n {
		p := (s.readNext + k) % n
		i := s.members[p]
		if !set.available(i, now) {
			continue
		}
		r := set.read[i]
		if !r.empty || now.Sub(r.emptyAt) >= set.opts.EmptySkip || set.exhaustive || all {
			out = append(out, readCandidate{index: i, warm: !r.empty})
			if first < 0 {
				first = p
			}
			continue
		}
		if fallback < 0 || r.lastPoll.Before(set.read[fallback].lastPoll) {
			fallback, fallbackPos = i, p
		}
	}
	if len(out) == 0 && fallback >= 0 {
		out = append(out, readCandidate{index: fallback})
		first = fallbackPos
	}
	if first >= 0 {
		s.readNext = (first + 1) % n
	}
	return out
}

// dueLook is what a listener asks of a receive made for messages it knows
// are due again (released for a retry, or left hidden by a failed
// request): that a sharded queue ask every shard it can, however recently
// it found one empty, since those messages may be on any of them, and
// tell which it could not ask. A listener that took a partial batch from
// such a receive for "all that was due has been received" would otherwise
// forget messages on a shard that was passed over, and a push-only
// listener would never come back for them. It travels in the receive's
// context, so that a Source that wraps a ShardedQueue passes it on.
type dueLook struct {
	mu sync.Mutex
	// skippedUntil is when the earliest shard that could not be asked
	// (backed off) may be asked again; zero if every shard was asked.
	skippedUntil time.Time
}

type dueLookKey struct{}

// withDueLook returns ctx carrying look.
func withDueLook(ctx context.Context, look *dueLook) context.Context {
	return context.WithValue(ctx, dueLookKey{}, look)
}

// lookingForDue returns the dueLook ctx carries, if any.
func lookingForDue(ctx context.Context) *dueLook {
	look, _ := ctx.Value(dueLookKey{}).(*dueLook)
	return look
}

// skipped records that a shard could not be asked until until.
func (look *dueLook) skipped(until time.Time) {
	look.mu.Lock()
	defer look.mu.Unlock()
	if look.skippedUntil.IsZero() || until.Before(look.skippedUntil) {
		look.skippedUntil = until
	}
}

// unaskedUntil reports whether a shard could not be asked, and when the
// earliest such may be asked again. A nil look asked no shard for anything.
func (look *dueLook) unaskedUntil() (time.Time, bool) {
	if look == nil {
		return time.Time{}, false
	}
	look.mu.Lock()
	defer look.mu.Unlock()
	return look.skippedUntil, !look.skippedUntil.IsZero()
}

// unasked records in look the shards a receive now cannot ask: those
// backed off.
func (s *ShardedQueue) unasked(look *dueLook, now time.Time) {
	for _, i := range s.members {
		if !s.set.available(i, now) {
			_, until, _ := s.set.retryAt(i)
			look.skipped(until)
		}
	}
}

// receiveFrom receives from shard i, records what it found, and wraps each
// delivery's receipt in one that names shard i. A shard that fails after
// bringing messages (a Source of one's own may) has them returned with its
// error, not dropped: they are hidden already.
func (set *shardSet) receiveFrom(ctx context.Context, i, max int, visibility time.Duration) ([]*Delivery, error) {
	batch, err := set.shards[i].Receive(ctx, max, visibility)
	set.record(ctx, i, err)
	batch = slices.DeleteFunc(batch, func(d *Delivery) bool { return d == nil })
	if err != nil {
		set.wrap(i, batch)
		return batch, err
	}
	now := set.now()
	set.mu.Lock()
	r := &set.read[i]
	r.lastPoll, r.empty = now, len(batch) == 0
	if r.empty {
		r.emptyAt = now
	}
	set.mu.Unlock()
	set.wrap(i, batch)
	return batch, nil
}

// wrap puts each delivery's receipt, from shard i, in one that names the
// shard: one allocation per receive.
func (set *shardSet) wrap(i int, batch []*Delivery) {
	receipts := make([]shardReceipt, len(batch))
	for k, d := range batch {
		receipts[k] = shardReceipt{set: set, index: i, inner: d.Receipt}
		d.Receipt = &receipts[k]
	}
}

// shardReceipt is the Receipt of a delivery received through a sharded
// queue: the shard it came through and that shard's own receipt. A shard
// that is itself sharded nests its receipt inside.
type shardReceipt struct {
	set   *shardSet
	index int
	inner any
}

// receipt returns the receipt of a delivery that came through this set.
func (set *shardSet) receipt(d *Delivery) (*shardReceipt, error) {
	if d != nil {
		if r, ok := d.Receipt.(*shardReceipt); ok && r.set == set {
			return r, nil
		}
	}
	return nil, errors.New("azdispatch: delivery did not come from sharded queue " + set.name)
}
