package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/breaker"
	"github.com/azdispatch/azdispatch/internal/svcclock"
)

// shardSet is what the views of one sharded queue share: the shards, their
// health, and what reads have seen on them.
type shardSet struct {
	name   string
	shards []Shard
	caps   []Capabilities     // per shard: what it can do, read once
	health []*breaker.Breaker // per shard
	group  []*breaker.Breaker // per shard: its account's breaker, shared; nil if unknown
	opts   ShardedQueueOptions
	log    *slog.Logger
	now    func() time.Time

	mu   sync.Mutex
	read []shardRead // per shard, under mu
	// late counts the shards with receives that got no answer (see
	// shardRead.lateHidden), so that a success needs no lock otherwise.
	late atomic.Int32

	// exhaustive sets (poison sets) ask every shard before saying "empty",
	// so that [Requeue] over them does not stop early.
	exhaustive bool
	parent     *shardSet // of a poison set: the set whose shards it sits beside
	// owner is the [QueueSet] whose queues these are (one generation of
	// them); nil for a [ShardedQueue]'s shards.
	owner *QueueSet

	poisonOnce sync.Once
	poison     *shardSet
}

// shardRead is what reads have seen of one shard.
type shardRead struct {
	empty    bool      // the last receive found nothing
	emptyAt  time.Time // when it did
	lastPoll time.Time
	// A receive that got no answer may still be carried out when the
	// shard's endpoint comes back, hiding messages from then: lateHidden
	// is the longest visibility of such receives, until a request to the
	// shard succeeds; reappear is then when what they hid is visible
	// again, for the receives made until a while after to report (see
	// dueLook.skipped), so that a listener looks for it then rather than
	// at its idle pace.
	lateHidden time.Duration
	reappear   time.Time
}

// reappearHint is how long after a late receive's messages reappear the
// receives keep reporting when: long enough for a listener backing off at
// its idle pace (30 s by default) to hear it.
const reappearHint = time.Minute

func newShardSet(name string, shards []Shard, caps []Capabilities, o ShardedQueueOptions) *shardSet {
	set := &shardSet{
		name: name, shards: append([]Shard(nil), shards...), caps: caps, opts: o,
		log: o.Logger.With("sharded_queue", name), now: time.Now,
		health: make([]*breaker.Breaker, len(shards)), group: make([]*breaker.Breaker, len(shards)),
		read: make([]shardRead, len(shards)),
	}
	// Shards of one account share a breaker for failures of the account's
	// endpoint: when it refuses connections, it does so for all of them.
	accounts := map[*Account]*breaker.Breaker{}
	for i, c := range set.caps {
		set.health[i] = new(breaker.Breaker)
		if a := c.account(); a != nil {
			if accounts[a] == nil {
				accounts[a] = new(breaker.Breaker)
			}
			set.group[i] = accounts[a]
		}
	}
	return set
}

func allShards(n int) []int {
	m := make([]int, n)
	for i := range m {
		m[i] = i
	}
	return m
}

// view returns a [ShardedQueue] over members of set. Its first write and its
// first read go to a random shard, so that a fleet starting together spreads.
func (set *shardSet) view(members []int) *ShardedQueue {
	s := &ShardedQueue{set: set, members: members, readNext: rand.IntN(len(members))}
	s.writeNext.Store(rand.Uint64N(uint64(len(members))))
	return s
}

// anyView is a view of set for what needs no members of its own: a delete
// or a visibility change through a delivery's receipt, a poison move
// beside the queue a message came from.
func (set *shardSet) anyView() *ShardedQueue { return &ShardedQueue{set: set} }

// carry gives shard to of set what shard from of prev has learnt: its
// health, its account's (if they share an account), and what reads found
// on it. A [QueueSet] whose queues change carries each that stays over.
func (set *shardSet) carry(prev *shardSet, from, to int) {
	set.health[to] = prev.health[from]
	if prev.group[from] != nil && set.group[to] != nil {
		for i := range set.group {
			if set.group[i] == set.group[to] && i != to {
				set.group[i] = prev.group[from]
			}
		}
		set.group[to] = prev.group[from]
	}
	prev.mu.Lock()
	r := prev.read[from]
	prev.mu.Unlock()
	set.mu.Lock()
	set.read[to] = r
	set.mu.Unlock()
	if r.lateHidden > 0 {
		set.late.Add(1)
	}
}

// throttledMax caps the back-off of a shard that answers 503 ServerBusy
// (its queue, or its account's requests, ingress or egress, over target).
// Such a shard is alive and over a target that is a rate per second: it
// takes requests again within about a second, and a longer pause would only
// leave its share undrained while its back-off grows with every 503 (the
// simulated load test's drain-unpaced variant throttles shards this way).
// Other 503s, like other failures, back off up to RetryMax.
const throttledMax = time.Second

// available reports whether shard i may be asked at now: neither it nor its
// account is backed off, or being tried again by another request (see
// admit, which a request then calls).
func (set *shardSet) available(i int, now time.Time) bool {
	if !set.health[i].Free(now) {
		return false
	}
	if g := set.group[i]; g != nil && !g.Free(now) {
		return false
	}
	return true
}

// admit reports whether a request may be made to shard i at now: while
// neither it nor its account is backed off; once their back-off has passed,
// to one request at a time, the trial (see [breaker.Breaker.Admit]), so that
// a shard that still hangs holds one request, not every one that comes
// while the trial waits.
func (set *shardSet) admit(i int, now time.Time) bool {
	hold := set.tryTimeout(maxReceiveBytes) + time.Second
	if !set.health[i].Admit(now, hold) {
		return false
	}
	if g := set.group[i]; g != nil && !g.Admit(now, hold) {
		return false
	}
	return true
}

// maxReceiveBytes is about the most a receive may bring back: a full batch
// of the largest messages.
const maxReceiveBytes = MaxBatch * serviceMessageLimit

// errNoAnswer is matched by the error of a request to a shard that did not
// answer within its try timeout (see [ShardedQueueOptions.TryTimeout]).
var errNoAnswer = errors.New("no answer")

// tryBytesPerSecond is the slowest transfer a request to a shard is given
// time for, beyond TryTimeout: far below what a client reaches within an
// Azure region, and loopback.
const tryBytesPerSecond = 4 << 20

// tryTimeout is how long a request to a shard that carries or brings back
// size bytes may take: TryTimeout, and a second per 4 MiB.
func (set *shardSet) tryTimeout(size int) time.Duration {
	return set.opts.TryTimeout + time.Duration(size)*time.Second/tryBytesPerSecond
}

// try makes call, one request to shard i that carries or brings back about
// size bytes, within the shard's try timeout, and records its outcome in
// the shard's breakers. A request that outlasts it while ctx is live with
// no answer at all (the SDK's retries of answers that came, such as 503s,
// are not that) fails with an error matching errNoAnswer (and
// [context.DeadlineExceeded]), and counts against the shard and its
// account: no answer says the endpoint is out, as a refused connection
// does. With failover set (another shard could serve the request), a try
// takes at most half the time ctx has left, so that the next shard has
// time too.
func (set *shardSet) try(ctx context.Context, i, size int, failover bool, call func(context.Context) error) error {
	d := set.tryTimeout(size)
	if deadline, ok := ctx.Deadline(); ok && failover {
		d = min(d, max(time.Until(deadline)/2, time.Millisecond))
	}
	started := set.now()
	tctx, cancel := context.WithTimeout(ctx, d)
	tctx, tries := svcclock.WithTries(tctx)
	err := call(tctx)
	noAnswer := err != nil && tctx.Err() != nil && ctx.Err() == nil && !tries.Answered()
	cancel()
	if noAnswer {
		err = fmt.Errorf("shard %q: %w within %v (ShardedQueueOptions.TryTimeout): %w", set.shards[i].Name(), errNoAnswer, d.Round(time.Millisecond), bare{err})
	}
	if set.exhaustive && isQueueNotFound(err) {
		return err // a poison queue nothing was poisoned into yet: not a failing shard
	}
	set.record(ctx, i, started, err)
	return err
}

// retryAt is shard i's failure count, the end of its back-off and its last
// error, whichever of its own and its account's breakers is open longer.
func (set *shardSet) retryAt(i int) (int64, time.Time, error) {
	failures, until, last := set.health[i].State()
	if g := set.group[i]; g != nil {
		if gf, gu, gl := g.State(); gu.After(until) {
			failures, until, last = gf, gu, gl
		}
	}
	return failures, until, last
}

// record updates shard i's breakers with the outcome of a request that
// started at started.
func (set *shardSet) record(ctx context.Context, i int, started time.Time, err error) {
	if err == nil {
		recovered := set.health[i].Succeed()
		if g := set.group[i]; g != nil && g.Succeed() {
			recovered = true
		}
		if recovered {
			set.log.Info("shard recovered", "shard", set.shards[i].Name())
		}
		if set.late.Load() > 0 {
			set.mu.Lock()
			if r := &set.read[i]; r.lateHidden > 0 {
				// Anything its unanswered receives were to hide, they hid
				// by now: it reappears after their visibility from here.
				r.reappear = reappearsBy(set.now(), r.lateHidden)
				r.lateHidden = 0
				set.late.Add(-1)
			}
			set.mu.Unlock()
		}
		return
	}
	shard, account := fault(ctx, err)
	if !shard {
		return
	}
	b := set.health[i]
	if account && set.group[i] != nil {
		b = set.group[i]
	}
	minWait, maxWait := set.opts.RetryMin, set.opts.RetryMax
	switch {
	case throttled(err):
		maxWait = max(set.opts.RetryMin, min(maxWait, throttledMax))
	case errors.Is(err, errNoAnswer):
		// An endpoint that gave no answer for TryTimeout is not back a
		// moment later: each trial holds a request that long, and may
		// leave a duplicate of a send when the endpoint comes back.
		minWait = min(max(minWait, set.opts.TryTimeout), maxWait)
	}
	now := set.now()
	// A request under way when the failure that backed the shard off was
	// counted is the same outage: it does not count again.
	n, wait, counted := b.FailStarted(started, now, err, minWait, maxWait)
	if hinted := hintedWait(err, wait); hinted > wait {
		// The service said when it will take requests again: asking
		// before then only earns another 503.
		b.Hold(now.Add(hinted))
		wait = hinted
	}
	if !counted {
		return
	}
	set.log.Warn("shard backed off", "shard", set.shards[i].Name(), "whole_account", account && set.group[i] != nil,
		"failures", n, "retry_in", wait, "err", err)
}

// noHealthy is the error of a request no shard of this view could serve.
// The wait it names is its own shards': another view of the same set may
// hold shards that are not backed off at all.
func (s *ShardedQueue) noHealthy(op string, errs []error, now time.Time) error {
	set := s.set
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s on %q: %w", ErrNoHealthyShard, op, set.name, joinErrs(errs...))
	}
	next := time.Time{}
	var last []error
	for _, i := range s.members {
		_, until, lastErr := set.retryAt(i)
		if next.IsZero() || until.Before(next) {
			next = until
		}
		if lastErr != nil {
			last = append(last, lastErr)
		}
	}
	when := fmt.Sprintf("the first is tried again in %v", max(next.Sub(now), 0).Round(time.Millisecond))
	if !next.After(now) {
		when = "the first is being tried again by another request"
	}
	return fmt.Errorf("%w: %s on %q: every shard is backed off (last: %w); %s",
		ErrNoHealthyShard, op, set.name, joinErrs(last...), when)
}

// poisonSet builds the set of the shards' poison queues once.
func (set *shardSet) poisonSet() *shardSet {
	set.poisonOnce.Do(func() {
		shards := make([]Shard, len(set.shards))
		for i, c := range set.caps {
			if c.PoisonQueue == nil {
				return
			}
			q := c.PoisonQueue()
			if q == nil {
				return
			}
			shards[i] = q
		}
		p := newShardSet(set.name+poisonSuffix, shards, capabilitiesOfAll(shards), set.opts)
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
	if r, ok := origin.(*shardReceipt); ok && r.set == s.set.parent && s.set.admit(r.index, s.set.now()) {
		var id string
		err := s.set.try(ctx, r.index, len(text), true, func(ctx context.Context) (err error) {
			id, err = s.set.shards[r.index].Send(ctx, text, opts)
			return err
		})
		if f, _ := fault(ctx, err); !f {
			return id, err
		}
	}
	return s.Send(ctx, text, opts)
}

// shardReceipt is the Receipt of a delivery received through a sharded
// queue: the shard it came through and that shard's own receipt. A shard
// that is itself sharded nests its receipt inside.
type shardReceipt struct {
	set   *shardSet
	index int
	inner any
	// letGo is set once a [QueueSet] has counted the message out of hand.
	letGo atomic.Bool
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

// since is when shard i, or its account, began to fail: the earlier of
// the two runs of failures; zero if neither is failing.
func (set *shardSet) since(i int) time.Time {
	s := set.health[i].Since()
	if g := set.group[i]; g != nil {
		if gs := g.Since(); !gs.IsZero() && (s.IsZero() || gs.Before(s)) {
			s = gs
		}
	}
	return s
}

// serviceTimeKnown reports whether a shard of the set knows the service's
// time from an answer, or keeps a clock of its own.
func (s *ShardedQueue) serviceTimeKnown() bool {
	return slices.ContainsFunc(s.set.caps, Capabilities.serviceTimeKnown)
}

// learnTime learns the service's time from the first shard of the view
// that can tell it, in order: the shards' accounts are taken to share one
// clock, as the service's do.
func (s *ShardedQueue) learnTime(ctx context.Context) error {
	var errs []error
	learners := 0
	for _, i := range s.members {
		learn := s.set.caps[i].learnTime
		if learn == nil {
			continue
		}
		learners++
		if !s.set.admit(i, s.set.now()) {
			continue
		}
		err := s.set.try(ctx, i, 0, true, func(ctx context.Context) error { return learn(ctx) })
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if learners == 0 {
		return nil // shards of one's own, which cannot tell
	}
	return fmt.Errorf("learning the service's time from %s: %w", s.set.name, s.noHealthy("learn the time", errs, s.set.now()))
}
