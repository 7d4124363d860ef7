package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/jumphash"
)

// Shard is one queue of a [ShardedQueue]: a [*Queue], or anything else that is
// both a [Source] and a [Target], such as a wrapper that traces or injects
// faults, or an in-memory model for load tests.
type Shard interface {
	Source
	Target
}

// ShardedQueueOptions configures a [ShardedQueue]. Nil, or a zero field, means the
// documented default.
type ShardedQueueOptions struct {
	// EmptySkip is how long a shard that a receive found empty is passed
	// over while other shards may have messages. Defaults to 5 s: while some
	// shards are busy, an empty one costs one request per 5 s, and a message
	// that arrives on it waits at most that long. When every shard was empty
	// at its last look, receives go round the shards one request at a time.
	EmptySkip time.Duration

	// RetryMin and RetryMax bound the back-off of a failing shard: after n
	// failures in a row it is left alone for RetryMin·2^(n−1) ±20%, at most
	// RetryMax, then tried again. Default to 100 ms and 60 s: a shard that is
	// down reaches the longest back-off after about ten failures (some 100 s),
	// and then costs a request a minute. A shard that answers 503 ServerBusy
	// is only over its rate, not down, and backs off for at most 1 s (or
	// RetryMin, if that is longer), so that its share is not left undrained
	// nor pushed onto the other shards for long.
	RetryMin, RetryMax time.Duration

	// TryTimeout bounds one request to one shard, the SDK's retries of it
	// included, plus a second per 4 MiB the request carries or may bring
	// back (a receive of 32 messages may bring 2 MiB): a shard that has not
	// answered by then is counted as failing, with the rest of its
	// account, as if its connection had been refused, and a send goes on
	// to the next shard. A send that could go to another shard also takes
	// at most half the time its context has left, so that the next one has
	// time too. Defaults to 2 s: a hundred times a healthy request's usual
	// time, so that a slow answer is not taken for none, and short enough
	// that an account that hangs (a blackholed connection, a partition)
	// costs a send 2 s once, before its shards are backed off, rather than
	// the SDK's retries of a 30 s try timeout each (some two minutes). A
	// shard that gave no answer is backed off for at least TryTimeout (then
	// twice that, and so on, to RetryMax), and tried again by one request
	// at a time.
	TryTimeout time.Duration

	// Logger receives a line when a shard is backed off and when it
	// recovers. Defaults to none.
	Logger *slog.Logger

	// Payloads is where messages sent through the sharded queue that do
	// not fit a queue message, and batches, are offloaded, and where its
	// listeners read them: one store for every shard, so that a listener
	// validates every pointer against one container. Defaults to the store
	// of the first shard that has one (see [PayloadStorer]): for shards made
	// by [AccountShards], that of the first account.
	Payloads *PayloadStore
}

// ShardedQueue is one logical queue over many shards, which may live in
// several storage accounts: a [Source] for a [Listener] and a [Target] for a
// [Publisher], for work beyond one queue's (about 2,000 messages per second)
// or one account's (about 20,000 requests per second) scalability target.
//
// Sends go round-robin from a random starting shard, so a fleet of
// publishers spreads evenly; [ShardedQueue.SendKeyed] puts every message of a key on the
// same shard. Receives go round-robin too, but pass over shards that were
// just empty, so an idle sharded queue costs what one queue costs (one
// request per receive). A message is deleted or hidden through the shard it
// came from. A shard that fails (503 ServerBusy, 500 OperationTimedOut,
// timeouts, a queue that is gone) is backed off on its own, and when the
// failure is the account's endpoint itself, the account's other shards with
// it; sends go to other shards, receives keep draining the healthy ones.
//
// [ShardedQueue.Subset] gives a listener a fixed part of the shards (instance i
// of n), and [ShardedQueue.PoisonQueue] a poison queue beside each shard. A
// ShardedQueue is safe for concurrent use.
type ShardedQueue struct {
	set     *shardSet
	members []int // the indexes of set.shards this view reads and writes

	readMu   sync.Mutex
	readNext int // position in members where the next read looks first

	writeNext atomic.Uint64
}

var (
	_ Source = (*ShardedQueue)(nil)
	_ Target = (*ShardedQueue)(nil)
)

// NewShardedQueue returns a sharded queue called name (for logs, errors and
// poison envelopes) over shards, in that order: [KeyShard] numbers them so,
// and new shards must be added at the end to keep keys where they are.
// [AccountShards] makes the usual shards, queues spread over accounts.
func NewShardedQueue(name string, shards []Shard, opts *ShardedQueueOptions) (*ShardedQueue, error) {
	if name == "" {
		return nil, &ConfigError{Field: "name", Reason: "empty"}
	}
	if len(shards) == 0 {
		return nil, &ConfigError{Field: "shards", Reason: "none given"}
	}
	for i, sh := range shards {
		if sh == nil {
			return nil, &ConfigError{Field: "shards", Reason: fmt.Sprintf("shard %d is nil", i)}
		}
	}
	var o ShardedQueueOptions
	if opts != nil {
		o = *opts
	}
	caps := capabilitiesOfAll(shards)
	if o.Payloads == nil {
		for _, c := range caps {
			if o.Payloads = c.payloadStore(); o.Payloads != nil {
				break
			}
		}
	}
	setDefault(&o.EmptySkip, 5*time.Second)
	setDefault(&o.RetryMin, 100*time.Millisecond)
	setDefault(&o.RetryMax, time.Minute)
	setDefault(&o.TryTimeout, defaultTryTimeout)
	if o.EmptySkip < 0 || o.RetryMin < 0 || o.RetryMax < o.RetryMin {
		return nil, &ConfigError{Field: "ShardedQueueOptions", Reason: "EmptySkip and RetryMin must not be negative, nor RetryMax less than RetryMin"}
	}
	if o.TryTimeout < 0 {
		return nil, &ConfigError{Field: "ShardedQueueOptions.TryTimeout", Reason: fmt.Sprintf("%v is negative", o.TryTimeout)}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	set := newShardSet(name, shards, caps, o)
	return set.view(allShards(len(shards))), nil
}

// defaultTryTimeout is ShardedQueueOptions.TryTimeout's default.
const defaultTryTimeout = 2 * time.Second

// AccountShards opens n queues named "<base>-0" to "<base>-<n−1>", shard i in
// accounts[i mod len(accounts)], so that consecutive shards, and so
// round-robin sends, alternate between accounts. The queues are created when
// first used. The base name may be up to 56 characters less the digits and
// hyphen of the largest index (see [Account.Queue]).
func AccountShards(base string, n int, accounts ...*Account) ([]Shard, error) {
	if n < 1 {
		return nil, &ConfigError{Field: "shard count", Reason: fmt.Sprintf("%d; need at least 1", n)}
	}
	if len(accounts) == 0 {
		return nil, &ConfigError{Field: "accounts", Reason: "none given"}
	}
	shards := make([]Shard, n)
	for i := range n {
		a := accounts[i%len(accounts)]
		if a == nil {
			return nil, &ConfigError{Field: "accounts", Reason: fmt.Sprintf("account %d is nil", i%len(accounts))}
		}
		q, err := a.Queue(fmt.Sprintf("%s-%d", base, i))
		if err != nil {
			return nil, err
		}
		shards[i] = q
	}
	return shards, nil
}

// Name is the sharded queue's name.
func (s *ShardedQueue) Name() string { return s.set.name }

// Shards returns the shards this queue reads and writes, in order.
func (s *ShardedQueue) Shards() []Shard {
	out := make([]Shard, len(s.members))
	for p, i := range s.members {
		out[p] = s.set.shards[i]
	}
	return out
}

// Subset returns a view of the shards at positions p with p mod n = i: the
// part that instance i of n listeners reads, so that every shard has exactly
// one reader and messages never move between instances (moving a message
// would cost requests and raise its dequeue count). With [ShardedQueue.SendKeyed], all
// messages of a key reach the same instance. The view shares the shards'
// health with s; its Send spreads over its own shards only, while SendKeyed
// always maps keys over the whole set.
func (s *ShardedQueue) Subset(i, n int) (*ShardedQueue, error) {
	if n < 1 || i < 0 || i >= n {
		return nil, &ConfigError{Field: "Subset", Reason: fmt.Sprintf("instance %d of %d", i, n)}
	}
	var m []int
	for p, idx := range s.members {
		if p%n == i {
			m = append(m, idx)
		}
	}
	if len(m) == 0 {
		return nil, &ConfigError{Field: "Subset", Reason: fmt.Sprintf("instance %d of %d gets none of %d shards", i, n, len(s.members))}
	}
	return s.set.view(m), nil
}

// PayloadStore implements [PayloadStorer]: [ShardedQueueOptions.Payloads], or
// the store of the first shard that has one. The poison queue of a sharded
// queue, and its subsets, share it.
func (s *ShardedQueue) PayloadStore() *PayloadStore { return s.set.opts.Payloads }

// Create creates every shard that can be created (those with a Create
// method, such as [*Queue]), in parallel. Shards are also created on first
// use; Create makes that cost fall before a measurement or a deadline.
func (s *ShardedQueue) Create(ctx context.Context) error {
	errs := make([]error, len(s.members))
	var wg sync.WaitGroup
	for p, i := range s.members {
		if create := s.set.caps[i].Create; create != nil {
			wg.Go(func() { errs[p] = create(ctx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Send puts text on the next healthy shard, round-robin. If that shard fails,
// or does not answer within [ShardedQueueOptions.TryTimeout], it is backed
// off and the next one is tried, each shard once; a failure that another
// shard would repeat (a text too large) is returned at once. It fails with
// [ErrNoHealthyShard] only when no shard took the message. A shard that
// failed after storing the message (a lost response) leaves a duplicate:
// delivery is at least once.
func (s *ShardedQueue) Send(ctx context.Context, text string, opts *SendOptions) (string, error) {
	m, err := s.sendMessage(ctx, text, opts)
	return m.ID, err
}

// sendMessage is [ShardedQueue.Send], with what the shard said of the message.
func (s *ShardedQueue) sendMessage(ctx context.Context, text string, opts *SendOptions) (sentMessage, error) {
	// Refused here, before any shard is asked: no shard would take it.
	if err := checkText(text, serviceMessageLimit); err != nil {
		return sentMessage{}, err
	}
	n := uint64(len(s.members))
	start := s.writeNext.Add(1)
	var errs []error
	for k := range n {
		i := s.members[(start+k)%n]
		if !s.set.admit(i, s.set.now()) {
			continue
		}
		var m sentMessage
		err := s.set.try(ctx, i, len(text), k+1 < n, func(ctx context.Context) (err error) {
			m, err = s.set.caps[i].send(ctx, text, opts)
			return err
		})
		if err == nil {
			return m, nil
		}
		if f, _ := fault(ctx, err); !f {
			return sentMessage{}, err
		}
		errs = append(errs, err)
	}
	return sentMessage{}, s.noHealthy("send", errs, s.set.now())
}

// SendKeyed puts text on the shard [KeyShard](key, number of shards) picks,
// over all shards of the set (also when called on a [ShardedQueue.Subset]), so every
// message of a key is on one shard and reaches one listener instance. If
// that shard is backed off it fails with [ErrNoHealthyShard] rather than
// sending elsewhere, which would break that promise; the caller retries
// later. The key is not stored and not logged.
func (s *ShardedQueue) SendKeyed(ctx context.Context, key, text string, opts *SendOptions) (string, error) {
	m, err := s.sendKeyedMessage(ctx, key, text, opts)
	return m.ID, err
}

// sendKeyedMessage is [ShardedQueue.SendKeyed], with what the shard said of
// the message.
func (s *ShardedQueue) sendKeyedMessage(ctx context.Context, key, text string, opts *SendOptions) (sentMessage, error) {
	if err := checkText(text, serviceMessageLimit); err != nil {
		return sentMessage{}, err
	}
	i := KeyShard(key, len(s.set.shards))
	if now := s.set.now(); !s.set.admit(i, now) {
		_, until, last := s.set.retryAt(i)
		when := "backed off until " + until.Format(time.RFC3339)
		if !until.After(now) {
			when = "being tried again by another request"
		}
		return sentMessage{}, fmt.Errorf("%w: the key's shard %q is %s: %w", ErrNoHealthyShard, s.set.shards[i].Name(), when, last)
	}
	var m sentMessage
	err := s.set.try(ctx, i, len(text), false, func(ctx context.Context) (err error) {
		m, err = s.set.caps[i].send(ctx, text, opts)
		return err
	})
	if f, _ := fault(ctx, err); f {
		// The key's shard failed (or gave no answer): a keyed send does
		// not go elsewhere, so the caller retries later, as for one backed
		// off.
		return m, fmt.Errorf("%w: the key's shard %q failed: %w", ErrNoHealthyShard, s.set.shards[i].Name(), err)
	}
	return m, err
}

// ServiceTime is the time on the service's clock as the first shard that
// knows it tells (see [Queue.ServiceTime]); the local clock if none does.
// The shards' accounts are taken to share one clock, as the service's do.
func (s *ShardedQueue) ServiceTime() time.Time { return serviceTime(s.set.caps...) }

// Delete deletes a message received from this sharded queue (or another
// view of its shards) through the shard it came from.
func (s *ShardedQueue) Delete(ctx context.Context, d *Delivery) error {
	r, err := s.set.receipt(d)
	if err != nil {
		return err
	}
	// A delete is the last use of d (renewals stopped, batch items over),
	// so d itself carries the shard's own receipt for the call.
	d.Receipt = r.inner
	err = s.set.try(ctx, r.index, 0, false, func(ctx context.Context) error { return s.set.shards[r.index].Delete(ctx, d) })
	d.Receipt = r
	return err
}

// SetVisibility hides a received message for after, through the shard it
// came from (see [Queue.SetVisibility]).
func (s *ShardedQueue) SetVisibility(ctx context.Context, d *Delivery, after time.Duration) error {
	r, err := s.set.receipt(d)
	if err != nil {
		return err
	}
	// The shard updates a copy of d that holds its own receipt, so that
	// d.Receipt itself never changes: a listener renews a batch's visibility
	// while its items may be poisoned on other goroutines, and the poison
	// move reads d.Receipt to find the shard (see sendBeside). The copy
	// leaves DequeueCount out: a listener's try sets it to the real tries
	// (a delayed message's hops taken off) while renewals run.
	onShard := Delivery{ID: d.ID, Text: d.Text, InsertedAt: d.InsertedAt, ExpiresAt: d.ExpiresAt,
		NextVisibleAt: d.NextVisibleAt, ReceivedAt: d.ReceivedAt, Queue: d.Queue, Receipt: r.inner}
	err = s.set.try(ctx, r.index, len(d.Text), false, func(ctx context.Context) error {
		return s.set.shards[r.index].SetVisibility(ctx, &onShard, after)
	})
	r.inner, d.NextVisibleAt = onShard.Receipt, onShard.NextVisibleAt
	return err
}

// Depth is the sum of the shards' depths, asked in parallel: one request per
// shard. Shards backed off after failures are left out, as they cannot be
// read now either; it fails only when no shard answered.
func (s *ShardedQueue) Depth(ctx context.Context) (int, error) {
	now := s.set.now()
	depths := make([]int, len(s.members))
	errs := make([]error, len(s.members))
	var wg sync.WaitGroup
	asked := 0
	for p, i := range s.members {
		if !s.set.admit(i, now) {
			continue
		}
		asked++
		wg.Go(func() {
			errs[p] = s.set.try(ctx, i, 0, false, func(ctx context.Context) (err error) {
				depths[p], err = s.set.shards[i].Depth(ctx)
				return err
			})
		})
	}
	wg.Wait()
	total, answered := 0, 0
	var failed []error
	for p := range s.members {
		switch {
		case errs[p] != nil:
			failed = append(failed, errs[p])
		default:
			total += depths[p]
		}
	}
	answered = asked - len(failed)
	if answered == 0 {
		return 0, s.noHealthy("depth", failed, now)
	}
	return total, nil
}

// KeyShard returns the shard, 0 to shards−1, that a keyed send puts key on.
// It is jump consistent hashing (Lamping and Veach, "A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014) of a fixed 64-bit hash of the
// key: every key keeps its shard when shards grow from n to n+1, except
// about 1/(n+1) of them, which move to the new shard. Every process, and
// every version of this package, agrees on it.
func KeyShard(key string, shards int) int { return jumphash.Shard(key, shards) }

var _ WakeSource = (*ShardedQueue)(nil)

// Subscribe implements [WakeSource]: wake is called after every send, in this
// process, through one of the set's shards that is itself a WakeSource (a
// [*Queue] is), whether it went through this ShardedQueue, another view of
// the same shards, or the shard directly. The shard sent to is marked as
// holding messages first, so that the receive the wake-up brings asks it
// even if it was empty a moment ago.
func (s *ShardedQueue) Subscribe(wake func()) (cancel func()) {
	var cancels []func()
	for _, i := range s.members {
		subscribe := s.set.caps[i].Subscribe
		if subscribe == nil {
			continue
		}
		cancels = append(cancels, subscribe(func() {
			s.set.mu.Lock()
			s.set.read[i].empty = false
			s.set.mu.Unlock()
			wake()
		}))
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}

// ShardHealth is one shard's state as its [ShardedQueue] sees it.
type ShardHealth struct {
	Shard string // the shard's name
	// Healthy is false from a failure of the shard, or of its account (a
	// refused connection, a 503, no answer within
	// [ShardedQueueOptions.TryTimeout]), until a request to it succeeds:
	// while it is backed off, and while it is tried again.
	Healthy  bool
	Failures int64 // failures in a row, of the shard or of its whole account
	// Since is when those failures began; zero while healthy.
	Since time.Time
	// RetryAt is when a backed-off shard is tried again; zero while
	// healthy, or while it is being tried.
	RetryAt   time.Time
	LastError error // the failure that backed it off
}

// Health returns the state of each shard of this view, in order. It makes
// no request: it is what the sharded queue's requests have found.
func (s *ShardedQueue) Health() []ShardHealth {
	now := s.set.now()
	out := make([]ShardHealth, len(s.members))
	for p, i := range s.members {
		failures, until, last := s.set.retryAt(i)
		out[p] = ShardHealth{Shard: s.set.shards[i].Name(), Healthy: failures == 0, Failures: failures, LastError: last}
		if failures > 0 {
			out[p].Since = s.set.since(i)
			if until.After(now) {
				out[p].RetryAt = until
			}
		}
	}
	return out
}

// Ready reports whether the sharded queue can serve requests: nil while a
// shard of this view is healthy or may be tried again; otherwise an error
// matching [ErrNoHealthyShard] that says when the first is tried again. It
// makes no request. With [ShardedQueue.Degraded] it serves a readiness
// probe (an endpoint.Health check) of a process that only sends.
func (s *ShardedQueue) Ready() error {
	now := s.set.now()
	for _, i := range s.members {
		if s.set.available(i, now) {
			return nil
		}
	}
	return s.noHealthy("serve", nil, now)
}

// Degraded names the shards of this view that are out, and why: nil while
// every shard is healthy. A sharded queue with a shard out still serves
// (sends and receives go round it), so [ShardedQueue.Ready] says ready; a
// readiness probe shows this beside it. It makes no request.
func (s *ShardedQueue) Degraded() error {
	var out []error
	for _, h := range s.Health() {
		if h.Healthy {
			continue
		}
		when := "being tried again"
		if !h.RetryAt.IsZero() {
			when = "to be tried again at " + h.RetryAt.UTC().Format(time.RFC3339)
		}
		failures := "failures"
		if h.Failures == 1 {
			failures = "failure"
		}
		out = append(out, fmt.Errorf("shard %q out since %s, after %d %s, %s: %w",
			h.Shard, h.Since.UTC().Format(time.RFC3339), h.Failures, failures, when, bare{h.LastError}))
	}
	if len(out) == 0 {
		return nil
	}
	return wrapf(joinErrs(out...), "%s: %d of %d shards out", s.set.name, len(out), len(s.members))
}

// The poison queues of a sharded queue sit beside its shards: shard
// "tasks-3" has "tasks-3-poison" in the same account. Poison capacity so
// grows with the shards, a poison move stays in the account the message
// came from (one account failing does not stop the others' poison moves),
// and a requeued message goes back to its own shard, keeping the affinity
// of keyed sends.

// PoisonQueue implements [PoisonQueuer]: it is where a listener on s moves
// messages it gives up on, a [*ShardedQueue] over the shards' own poison
// queues ("<shard>-poison" in the shard's account). A message is poisoned
// into its own shard's poison queue while that is healthy, and into another
// one otherwise. A receive from it asks every shard before it reports none,
// so [Requeue](ctx, s.PoisonQueue(), s, nil) moves everything back, spread
// round-robin; s.Requeue puts each message back on its own shard. It is nil
// unless every shard has a default poison queue (see [PoisonQueuer]).
func (s *ShardedQueue) PoisonQueue() Shard {
	if p := s.poisonQueue(); p != nil {
		return p
	}
	return nil // not a nil *ShardedQueue in a non-nil Shard
}

// poisonQueue is [ShardedQueue.PoisonQueue] as a *ShardedQueue, nil if
// there is none.
func (s *ShardedQueue) poisonQueue() *ShardedQueue {
	p := s.set.poisonSet()
	if p == nil {
		return nil
	}
	return p.view(s.members)
}

// Requeue moves the envelopes in each shard's poison queue back to that
// shard (see the package function [Requeue]), so keyed messages return to
// their key's shard. It goes on past a shard that fails, and returns the
// totals with the failures joined. [RequeueOptions.Max] in opts bounds the total.
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
		// Through views of the one shard, so that each request is
		// bounded by TryTimeout and counted in the shards' health, and a
		// shard backed off fails at once rather than hold the others.
		res, err := Requeue(ctx, p.view([]int{i}), s.set.view([]int{i}), &one)
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

// queueNamed is the shard called name, if it is a [CancelTarget]: its pop
// receipts cancel what was sent to it (see [Publisher.Cancel]).
func (s *ShardedQueue) queueNamed(name string) CancelTarget {
	for _, c := range s.set.caps {
		if c.queueNamed != nil {
			if q := c.queueNamed(name); q != nil {
				return q
			}
		}
	}
	return nil
}
