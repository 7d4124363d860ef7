package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch/internal/shares"
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
// [ShardedQueueOptions.EmptySkip]; when all are, the one looked at longest ago is
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
// fails with [ErrNoHealthyShard] only when no shard answered, or, for a
// [ShardedQueue.PoisonQueue], when it found none and a shard could not be
// asked: "none" from it must mean none anywhere, since [Requeue] stops at
// it.
func (s *ShardedQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error) {
	return s.receive(ctx, max, visibility, nil)
}

// readArranger orders the shards a receive reads, bounds each read, and
// hears what it read: a [QueueSet], whose shares and caps decide.
type readArranger interface {
	// arrange orders the candidates, leaving out those at their cap and
	// those paused (it reports whether it did).
	arrange(now time.Time, order []readCandidate) (arranged []readCandidate, capped, paused bool)
	// take reserves the room of c's queue for a read about to be made:
	// the most it may bring (0: no bound), or false to pass it over.
	take(c readCandidate) (limit int, ok bool)
	// got hears what the read of c, bounded by limit, brought, and
	// whether the queue answered; err is its failure.
	got(c readCandidate, limit int, batch []*Delivery, err error)
}

// receive is [ShardedQueue.Receive], with the order of the shards it reads
// arranged by p, if not nil.
func (s *ShardedQueue) receive(ctx context.Context, max int, visibility time.Duration, p readArranger) ([]*Delivery, error) {
	// Checked here so that a bad argument is not taken for a shard's failure.
	if err := checkReceive(max, visibility); err != nil {
		return nil, err
	}
	now := s.set.now()
	look := lookingForDue(ctx)
	all := look.lookingForAll()
	if all {
		s.unasked(look, now)
	}
	s.reappearing(look, now)
	order := s.readOrder(now, all)
	if p != nil {
		var capped, paused bool
		order, capped, paused = p.arrange(now, order)
		if capped && all {
			// Messages due again may be on a queue at its cap: a
			// listener that knows of them comes back for them, woken
			// sooner if a message of such a queue is let go.
			look.skipped(now.Add(cappedRecheck))
		}
		if len(order) == 0 && (capped || paused) {
			return nil, nil // every queue that could be asked has its fill in hand, or is paused
		}
	}
	r := s.readShards(ctx, order, max, visibility, look, all, p)
	if r.answered && (len(r.got) > 0 || !s.set.exhaustive || len(r.asked) == len(s.members)) {
		return r.got, nil
	}
	if r.answered {
		// A poison set's "none" must mean none on any shard (Requeue
		// stops at it): with a shard that failed or could not be asked,
		// it cannot be said.
		return nil, fmt.Errorf("%w: receive on %q: %d of %d shards could not be asked: %w", ErrNoHealthyShard, s.set.name,
			len(s.members)-len(r.asked), len(s.members), joinErrs(append(r.errs, s.lastErrors(r.asked))...))
	}
	// Messages a failing shard brought are returned with its error: they
	// are hidden already, and a listener handles them all the same.
	return r.got, s.noHealthy("receive", r.errs, now)
}

// shardsRead is what one receive got from the shards it asked.
type shardsRead struct {
	got      []*Delivery
	errs     []error
	asked    []int // the shards that answered
	answered bool
}

// readShards asks the shards in order for up to max messages, until it has
// them, a shard fails after bringing some, or the order ends; p, if not
// nil, bounds each read and hears what it brought.
func (s *ShardedQueue) readShards(ctx context.Context, order []readCandidate, max int, visibility time.Duration, look *dueLook, all bool, p readArranger) shardsRead {
	var r shardsRead
	for _, c := range order {
		if r.answered && !c.Warm && !s.set.exhaustive && !all {
			continue // known empty a moment ago: not worth a request now
		}
		limit := 0
		if p != nil {
			var ok bool
			if limit, ok = p.take(c); !ok {
				continue // at its cap since the order was made
			}
		}
		if !s.set.admit(c.Index, s.set.now()) {
			// Another request is trying it again after its back-off.
			if all {
				look.skipped(s.set.now().Add(s.set.tryTimeout(maxReceiveBytes)))
			}
			if p != nil {
				p.got(c, limit, nil, errNotAsked)
			}
			continue
		}
		want := max - len(r.got)
		if limit > 0 {
			want = min(want, limit)
		}
		batch, err := s.set.receiveFrom(ctx, c.Index, want, visibility)
		if p != nil {
			p.got(c, limit, batch, err)
		}
		r.got = append(r.got, batch...) // a shard may fail after bringing some
		if err != nil {
			// Its answer may have been lost with messages it hid: the
			// listener looks for them, though another shard answers.
			look.shardFailed()
			r.errs = append(r.errs, err)
			if len(r.got) > 0 || ctx.Err() != nil {
				// Messages in hand are already hidden, their visibility
				// running: return them rather than try more shards.
				break
			}
			continue
		}
		r.answered = true
		r.asked = append(r.asked, c.Index)
		if len(r.got) >= max {
			break
		}
	}
	return r
}

// lastErrors joins the last errors of the shards of this view that are not
// in asked: those that failed, were backed off, or were being tried again
// by another request.
func (s *ShardedQueue) lastErrors(asked []int) error {
	var errs []error
	for _, i := range s.members {
		if slices.Contains(asked, i) {
			continue
		}
		if _, _, last := s.set.retryAt(i); last != nil {
			errs = append(errs, last)
		} else {
			errs = append(errs, fmt.Errorf("shard %q is being tried again by another request", s.set.shards[i].Name()))
		}
	}
	return joinErrs(errs...)
}

// readCandidate is a shard a receive may ask, whether it may hold messages
// (it had some at its last look, or was never looked at), and the most it
// may bring, if a [QueueSet]'s cap limits it.
type readCandidate = shares.Candidate

// readOrder lists the shards a receive may ask, in round-robin order from
// where the last receive started: the healthy ones that are warm or whose
// EmptySkip has passed (every healthy one if all is set); after them, the
// healthy ones resting after an empty look, the one looked at longest ago
// first. A receive asks a resting shard only while no shard has answered:
// so an idle sharded queue asks one shard per receive, and a receive whose
// candidates all fail (one that does not answer, say) still asks the
// others rather than report no healthy shard. The next receive starts
// after the first one listed.
func (s *ShardedQueue) readOrder(now time.Time, all bool) []readCandidate {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	set := s.set
	set.mu.Lock()
	defer set.mu.Unlock()
	n := len(s.members)
	var out, resting []readCandidate
	restingPos := map[int]int{}
	first := -1
	for k := range n {
		p := (s.readNext + k) % n
		i := s.members[p]
		if !set.available(i, now) {
			continue
		}
		r := set.read[i]
		if !r.empty || now.Sub(r.emptyAt) >= set.opts.EmptySkip || set.exhaustive || all {
			out = append(out, readCandidate{Index: i, Warm: !r.empty})
			if first < 0 {
				first = p
			}
			continue
		}
		resting = append(resting, readCandidate{Index: i, Resting: true})
		restingPos[i] = p
	}
	slices.SortStableFunc(resting, func(a, b readCandidate) int {
		return set.read[a.Index].lastPoll.Compare(set.read[b.Index].lastPoll)
	})
	if first < 0 && len(resting) > 0 {
		first = restingPos[resting[0].Index]
	}
	if first >= 0 {
		s.readNext = (first + 1) % n
	}
	return append(out, resting...)
}

// dueLook is what a listener asks of a receive, and learns from it, about
// messages due again later (released for a retry, or left hidden by a
// failed request). A receive made for messages it knows are due asks a
// sharded queue to ask every shard it can, however recently it found one
// empty, since those messages may be on any of them, and to tell which it
// could not ask. A listener that took a partial batch from such a receive
// for "all that was due has been received" would otherwise forget messages
// on a shard that was passed over, and a push-only listener would never
// come back for them. Every receive learns whether a shard failed while
// another answered: the sharded queue's receive then succeeds, but the
// failed shard's answer may have been lost with messages it hid, which the
// listener must look for when they reappear, as after a failed receive. It
// travels in the receive's context, so that a [Source] that wraps a
// [ShardedQueue] passes it on.
type dueLook struct {
	// all is set for a receive made for messages known to be due: it asks
	// every shard. Set before the receive, and only read by it.
	all bool

	mu sync.Mutex
	// skippedUntil is when the earliest shard that could not be asked
	// (backed off) may be asked again; zero if every shard was asked.
	skippedUntil time.Time
	// failed is set when a shard's receive failed.
	failed bool
	// held is set when the source held messages back: a queue set's
	// queue at its cap, whose messages a partial batch leaves behind.
	held bool
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

// lookingForAll reports whether look asks every shard.
func (look *dueLook) lookingForAll() bool { return look != nil && look.all }

// shardFailed records, if look is not nil, that a shard's receive failed.
func (look *dueLook) shardFailed() {
	if look == nil {
		return
	}
	look.mu.Lock()
	defer look.mu.Unlock()
	look.failed = true
}

// heldBack records, if look is not nil, that the receive held messages
// back.
func (look *dueLook) heldBack() {
	if look == nil {
		return
	}
	look.mu.Lock()
	defer look.mu.Unlock()
	look.held = true
}

// wasHeld reports whether the receive held messages back.
func (look *dueLook) wasHeld() bool {
	if look == nil {
		return false
	}
	look.mu.Lock()
	defer look.mu.Unlock()
	return look.held
}

// anyFailed reports whether a shard's receive failed.
func (look *dueLook) anyFailed() bool {
	if look == nil {
		return false
	}
	look.mu.Lock()
	defer look.mu.Unlock()
	return look.failed
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

// reappearing records in look when what late receives hid reappears, on
// the shards where it does within reappearHint (see shardRead.reappear).
func (s *ShardedQueue) reappearing(look *dueLook, now time.Time) {
	if look == nil {
		return
	}
	s.set.mu.Lock()
	defer s.set.mu.Unlock()
	for _, i := range s.members {
		r := &s.set.read[i]
		switch {
		case r.reappear.IsZero():
		case now.After(r.reappear.Add(reappearHint)):
			r.reappear = time.Time{}
		default:
			look.skipped(r.reappear)
		}
	}
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
// bringing messages (a [Source] of one's own may) has them returned with its
// error, not dropped: they are hidden already.
func (set *shardSet) receiveFrom(ctx context.Context, i, max int, visibility time.Duration) ([]*Delivery, error) {
	var batch []*Delivery
	err := set.try(ctx, i, max*serviceMessageLimit, false, func(ctx context.Context) (err error) {
		batch, err = set.shards[i].Receive(ctx, max, visibility)
		return err
	})
	batch = slices.DeleteFunc(batch, func(d *Delivery) bool { return d == nil })
	if err != nil {
		if errors.Is(err, errNoAnswer) {
			set.mu.Lock()
			r := &set.read[i]
			if r.lateHidden == 0 {
				set.late.Add(1)
			}
			if visibility > r.lateHidden {
				r.lateHidden = visibility
			}
			set.mu.Unlock()
		}
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

// errNotAsked is what a read arranger hears of a shard passed over because
// another request is trying it again.
var errNotAsked = errors.New("not asked: being tried again by another request")

// cappedRecheck is how soon a listener looking for messages due again
// comes back to a [QueueSet] that passed over a queue at its cap.
const cappedRecheck = time.Second
