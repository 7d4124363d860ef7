package azdispatch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/shares"
	"github.com/azdispatch/azdispatch/internal/syncx"
)

// SetOrder is how a [QueueSet] shares its receives among its queues.
type SetOrder int

const (
	// FairShares gives every queue that has messages an equal share of the
	// messages received (weighted fair queueing with equal weights, a
	// refinement of deficit round-robin): one tenant's flood takes no more
	// than any other tenant's share while the others have messages, and a
	// quiet tenant's message is read at the next receive, ahead of every
	// queue that has been served more.
	FairShares SetOrder = iota
	// WeightedShares gives each queue that has messages a share of the
	// messages received in proportion to its [SetMember.Weight] while the
	// queues are saturated; a queue that runs dry gives its share to the
	// others, and comes back with an equal claim, not with credit saved.
	WeightedShares
	// StrictPriority reads the queues in their order, the first first: a
	// later queue is read only when those before it had no messages (or
	// are at their cap). A queue not read for [QueueSetOptions.Aging] is
	// read before all the others, so that a low level is never starved:
	// while higher levels are busy, each lower one still has a receive
	// per Aging.
	StrictPriority
)

// SetMember is one queue of a [QueueSet].
type SetMember struct {
	// Queue is the queue: a [*Queue], a [*ShardedQueue], a memqueue.Queue.
	Queue Shard
	// Weight is the queue's share with [WeightedShares]: a queue of weight
	// 3 is served three times as many messages as one of weight 1 while
	// both have messages. Defaults to 1; other orders refuse a weight
	// above 1.
	Weight int
	// Cap is the most of the queue's messages a listener on the set holds
	// at once, received and not yet settled, within the listener's own
	// bound ([ListenerOptions.Concurrency]): a queue at its cap is passed
	// over until one of its messages is let go. Zero means no cap of its
	// own.
	Cap int
}

// QueueSetOptions configures a [QueueSet]. Nil, or a zero field, means the
// documented default.
type QueueSetOptions struct {
	// Order is how receives are shared among the queues. Defaults to
	// [FairShares].
	Order SetOrder
	// Aging is how long a queue may go without a read under
	// [StrictPriority] before it is read ahead of the others. Defaults to
	// 30 s.
	Aging time.Duration
	// RoomWait is how long a receive that found nothing, while a queue
	// was passed over at its cap, waits for one of that queue's messages
	// to be let go (or a send to one of the queues), to read again, rather
	// than answer none (a listener would take none for an idle set and
	// rest, while the capped queue's messages wait). Defaults to 100 ms:
	// short, since a listener's receive is not cut short by its shutdown.
	// Negative: no wait.
	RoomWait time.Duration
	// ShardedQueueOptions sets how the queues are read, backed off when
	// they fail, and bounded in time, as for the shards of a
	// [ShardedQueue]: a queue found empty is passed over for EmptySkip
	// while others have messages (unless a wake-up says it was sent to;
	// EmptySkip defaults to 1 s under [StrictPriority], so that a higher
	// level sent to from another process without a wake-up is read within
	// a second), a queue that fails or hangs is backed off alone, and one
	// store holds the payloads of all.
	ShardedQueueOptions
}

// QueueSet is a [Source] over several queues, each with its own messages,
// read by one [Listener] with one handler budget: queues of priority
// levels ([StrictPriority]), of weighted classes of work
// ([WeightedShares]), or one per tenant ([FairShares]), each optionally
// capped ([SetMember.Cap]). Its queues are a fixed list
// ([NewQueueSet]), or every queue of an account whose name has a prefix,
// found again on an interval ([DiscoverQueueSet]).
//
// A message stays in its own queue throughout: it is deleted, hidden for a
// retry, or renewed there; it is poisoned into its own queue's poison queue
// (see [QueueSet.PoisonQueue]); [MessageInfo.Queue] names it. An idle set
// costs what one idle queue costs: a receive that finds nothing asks one
// queue, and the next receive the next one, while a wake-up from a send to
// any of the queues through this process ([WakeSource]), or
// [QueueSet.Notify], has that queue read at once. A queue that fails, or
// hangs, is backed off alone.
//
// The set counts the messages of each queue in hand, for the caps and for
// [QueueSet.State], from what a [Listener] on it tells it (see
// [Capabilities]): a [Source] of your own that wraps a QueueSet passes on
// its Settled method, or the caps count only the messages deleted. A
// QueueSet is safe for concurrent use; one listener (or one per process)
// reads it.
type QueueSet struct {
	name     string
	opts     QueueSetOptions // with defaults
	mode     shares.Mode
	discover *discoverer // nil for a fixed list
	wakers   syncx.Subscribers
	// room is broadcast when a receive that found nothing might find
	// something now: a queue passed over at its cap has room again, or a
	// queue was sent to.
	room   *syncx.Signal
	poison *setPoison // nil unless every queue has a poison queue
	// sent holds, by queue name, whether a wake-up said the queue was
	// sent to since the last receive: set without a lock (a sender's
	// wake-up must not wait for a change of the queues), and read by the
	// next receive, which then asks that queue first.
	sent sync.Map // string → *atomic.Bool

	// mu is held for reading by every use of the members, and for
	// writing by a change of them, which so never falls between a
	// receive's arranging and its counting.
	mu          sync.RWMutex
	gen         *generation
	unsubscribe map[string]func() // by queue name: ends its wake-ups
}

var (
	_ Source     = (*QueueSet)(nil)
	_ WakeSource = (*QueueSet)(nil)
)

// NewQueueSet returns a set called name (for logs, errors and poison
// envelopes) over members, in order: under [StrictPriority], the first is
// the highest level.
func NewQueueSet(name string, members []SetMember, opts *QueueSetOptions) (*QueueSet, error) {
	q, err := newQueueSet(name, opts)
	if err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, &ConfigError{Field: "members", Reason: "none given"}
	}
	if err := q.setMembers(members); err != nil {
		return nil, err
	}
	q.poison = q.poisonOf()
	return q, nil
}

// newQueueSet returns a set with no members yet.
func newQueueSet(name string, opts *QueueSetOptions) (*QueueSet, error) {
	if name == "" {
		return nil, &ConfigError{Field: "name", Reason: "empty"}
	}
	var o QueueSetOptions
	if opts != nil {
		o = *opts
	}
	setDefault(&o.Aging, 30*time.Second)
	setDefault(&o.RoomWait, 100*time.Millisecond)
	setDefault(&o.TryTimeout, defaultTryTimeout)
	if o.Order == StrictPriority {
		// A higher level found empty is looked at again within a second
		// while a lower one keeps receives busy, wake-ups or not.
		setDefault(&o.EmptySkip, time.Second)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	mode, err := o.mode()
	if err != nil {
		return nil, err
	}
	return &QueueSet{name: name, opts: o, mode: mode, gen: &generation{}, unsubscribe: map[string]func(){}, room: syncx.NewSignal()}, nil
}

// mode is the order as the policy knows it.
func (o QueueSetOptions) mode() (shares.Mode, error) {
	if o.Aging < 0 {
		return 0, &ConfigError{Field: "QueueSetOptions.Aging", Reason: fmt.Sprintf("%v is negative", o.Aging)}
	}
	switch o.Order {
	case FairShares:
		return shares.Fair, nil
	case WeightedShares:
		return shares.Weighted, nil
	case StrictPriority:
		return shares.Strict, nil
	}
	return 0, &ConfigError{Field: "QueueSetOptions.Order", Reason: fmt.Sprintf("%d is not a SetOrder", o.Order)}
}

// check refuses member i of a set whose order is order; names are those
// of the members before it.
func (m SetMember) check(i int, order SetOrder, names map[string]bool) error {
	field := fmt.Sprintf("members[%d]", i)
	switch {
	case m.Queue == nil:
		return &ConfigError{Field: field, Reason: "no queue"}
	case m.Weight < 0 || m.Cap < 0:
		return &ConfigError{Field: field, Reason: "a negative weight or cap"}
	case m.Weight > 1 && order != WeightedShares:
		return &ConfigError{Field: field + ".Weight", Reason: "only WeightedShares weighs queues"}
	case names[m.Queue.Name()]:
		return &ConfigError{Field: field, Reason: fmt.Sprintf("queue %q is in the set twice", m.Queue.Name())}
	}
	names[m.Queue.Name()] = true
	return nil
}

// current is the set's members now: hold q.mu for reading while using it.
func (q *QueueSet) current() *generation { return q.gen }

// Name is the set's name.
func (q *QueueSet) Name() string { return q.name }

// Shards returns the set's queues now, in order: the endpoints, the
// dashboard and the command-line tool show each.
func (q *QueueSet) Shards() []Shard {
	q.mu.RLock()
	defer q.mu.RUnlock()
	out := make([]Shard, len(q.gen.members))
	for i, m := range q.gen.members {
		out[i] = m.Queue
	}
	return out
}

// Receive gets up to max messages from the set's queues, in the set's
// order: from the first queue that has messages and is not at its cap,
// then, if that had fewer than max (or its cap allowed fewer), from the
// next ones, as [ShardedQueue.Receive] goes round its shards. It fails
// only when no queue answered; a set with no queues (none found yet)
// returns none. A set that discovers its queues looks for them again first
// once its interval has passed.
// A receive that finds nothing while a queue was passed over at its cap
// waits for room there (see [QueueSetOptions].RoomWait).
func (q *QueueSet) Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error) {
	if q.discover != nil {
		q.discover.maybe(ctx, q)
	}
	room := q.room.Current()
	got, capped, err := q.receiveOnce(ctx, max, visibility)
	if len(got) == 0 && err == nil && capped {
		if !syncx.Sleep(ctx, q.opts.RoomWait, room) || !syncx.IsClosed(room) {
			return got, err
		}
		got, capped, err = q.receiveOnce(ctx, max, visibility)
	}
	if capped && len(got) > 0 {
		// A partial batch here is the cap's doing: a listener asks again
		// rather than take it for "no more".
		lookingForDue(ctx).heldBack()
	}
	return got, err
}

// receiveOnce is one receive from the set's queues now; it reports whether
// a queue was passed over at its cap, or its read cut by it.
func (q *QueueSet) receiveOnce(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, bool, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	g := q.current()
	if g.sq == nil {
		return nil, false, checkReceive(max, visibility)
	}
	g.takeWakes()
	rc := &readCounter{q: q, g: g, paused: g.pausedNow(ctx)}
	got, err := g.sq.receive(ctx, max, visibility, rc)
	if rc.gone && q.discover != nil {
		// A queue deleted: list the queues again at the next receive
		// rather than after the interval, so that it is dropped.
		q.discover.soon()
	}
	return got, rc.capped, err
}

// readCounter arranges, bounds and counts one receive of one generation.
type readCounter struct {
	q *QueueSet
	g *generation
	// capped is set when a queue was passed over at its cap, or its read
	// cut by it; gone when a queue was found deleted.
	capped, gone bool
	// paused holds, by queue, whether its pause holds (nil: none does).
	paused []bool
}

// arrange orders a receive's candidates by the set's shares and caps,
// leaving out the queues paused.
func (r *readCounter) arrange(now time.Time, order []readCandidate) ([]readCandidate, bool, bool) {
	held := false
	if r.paused != nil {
		order = slices.DeleteFunc(slices.Clone(order), func(c readCandidate) bool { return r.paused[c.Index] })
		held = true
	}
	arranged, capped := r.g.policy.Arrange(now, order)
	r.capped = capped
	return arranged, capped, held
}

// take reserves c's room under its cap, just before its read.
func (r *readCounter) take(c readCandidate) (int, bool) {
	limit, ok := r.g.policy.Take(c.Index)
	if !ok {
		r.capped = true
	}
	return limit, ok
}

// got counts what the read of c brought (those a failing queue brought are
// in hand all the same), and notes the time in queue of first deliveries.
func (r *readCounter) got(c readCandidate, limit int, batch []*Delivery, err error) {
	g := r.g
	local := time.Now()
	for _, d := range batch {
		if d.DequeueCount == 1 && !d.InsertedAt.IsZero() && !d.ReceivedAt.IsZero() {
			// Noted by the local clock, which the window's summary reads.
			g.waits[c.Index].Add(local, d.ReceivedAt.Sub(d.InsertedAt))
		}
	}
	if limit > 0 && len(batch) >= limit {
		r.capped = true
	}
	if isQueueNotFound(err) {
		r.gone = true
	}
	if g.policy.Got(c.Index, limit, len(batch), err == nil, g.sq.set.now()) {
		// Room given back, after a receive meanwhile passed the queue over
		// at its cap: a listener that found nothing else comes back.
		r.q.roomAgain()
	}
}

// roomAgain tells whoever waits that a queue passed over at its cap has
// room again: a receive waiting for it, and a listener resting.
func (q *QueueSet) roomAgain() {
	q.room.Broadcast()
	q.wakers.Wake()
}

// receiptOf is the receipt of a delivery received from the set, in any
// generation of its members.
func (q *QueueSet) receiptOf(d *Delivery) (*shardReceipt, error) {
	if d != nil {
		if r, ok := d.Receipt.(*shardReceipt); ok && r.set.owner == q {
			return r, nil
		}
	}
	return nil, fmt.Errorf("azdispatch: delivery did not come from queue set %s", q.name)
}

// Delete deletes a message received from the set, in its own queue. A
// message deleted is out of hand for the caps.
func (q *QueueSet) Delete(ctx context.Context, d *Delivery) error {
	r, err := q.receiptOf(d)
	if err != nil {
		return err
	}
	if err := r.set.anyView().Delete(ctx, d); err != nil {
		return err
	}
	q.Settled(d)
	return nil
}

// SetVisibility hides a received message for after, in its own queue.
func (q *QueueSet) SetVisibility(ctx context.Context, d *Delivery, after time.Duration) error {
	r, err := q.receiptOf(d)
	if err != nil {
		return err
	}
	return r.set.anyView().SetVisibility(ctx, d, after)
}

// Settled tells the set that a listener has let go of d (deleted it, hid it
// for a retry, poisoned it, or left it to reappear): it no longer counts
// against its queue's cap. A [Listener] calls it once per delivery; later
// calls for the same delivery do nothing.
func (q *QueueSet) Settled(d *Delivery) {
	r, err := q.receiptOf(d)
	if err != nil || !r.letGo.CompareAndSwap(false, true) {
		return
	}
	q.mu.RLock()
	g := q.current()
	i, ok := g.index[r.set.shards[r.index].Name()]
	room := ok && g.policy.Done(i)
	q.mu.RUnlock()
	if room {
		// A receive passed over the queue at its cap: a listener that
		// found nothing else comes back for it now.
		q.roomAgain()
	}
}

// Notify says that work was sent to the set's queue called queue, from
// this process or another (an endpoint.WakeHandler's callback, say): that
// queue is read at the next receive, even if it was found empty a moment
// ago, and a listener on the set is woken. A name not in the set wakes
// the listener all the same.
func (q *QueueSet) Notify(queue string) {
	if sent, ok := q.sent.Load(queue); ok {
		sent.(*atomic.Bool).Store(true)
	}
	q.room.Broadcast()
	q.wakers.Wake()
}

// Depth is the sum of the queues' depths (see [ShardedQueue.Depth]).
func (q *QueueSet) Depth(ctx context.Context) (int, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.Depth(ctx)
	}
	return 0, nil
}

// Peek looks at up to max visible messages of the set's queues without
// hiding them (see [ShardedQueue.Peek]).
func (q *QueueSet) Peek(ctx context.Context, max int) ([]*Delivery, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.Peek(ctx, max)
	}
	return nil, checkCount("Peek's max", max)
}

// Subscribe implements [WakeSource]: wake is called after every send
// through one of the queues in this process (the queue sent to is read at
// the next receive, even if it was found empty a moment ago), on
// [QueueSet.Notify], and when a queue at its cap falls below it.
func (q *QueueSet) Subscribe(wake func()) (cancel func()) { return q.wakers.Subscribe(wake) }

// PayloadStore implements [PayloadStorer]: the one store a listener on the
// set reads payloads from (see [ShardedQueueOptions.Payloads]).
func (q *QueueSet) PayloadStore() *PayloadStore {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.PayloadStore()
	}
	return q.opts.Payloads
}

// Create creates every queue of the set that can be created.
func (q *QueueSet) Create(ctx context.Context) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.Create(ctx)
	}
	return nil
}

// Health returns the state of each queue, in order (see
// [ShardedQueue.Health]). It makes no request.
func (q *QueueSet) Health() []ShardHealth {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.Health()
	}
	return nil
}

// Degraded names the queues that are out, and why: nil while every queue
// is healthy (see [ShardedQueue.Degraded]), and, for a set that discovers
// its queues, why the last look for them failed.
func (q *QueueSet) Degraded() error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	var errs []error
	if g := q.current(); g.sq != nil {
		errs = append(errs, g.sq.Degraded())
	}
	if q.discover != nil {
		errs = append(errs, q.discover.failure())
	}
	return joinErrs(errs...)
}

// ServiceTime is the time on the service's clock, as the first queue that
// knows it tells (see [Queue.ServiceTime]).
func (q *QueueSet) ServiceTime() time.Time {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return serviceTime(q.current().caps()...)
}

// What a set passes on of its queues' own capabilities.

func (q *QueueSet) serviceTimeKnown() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	g := q.current()
	return g.sq == nil || g.sq.serviceTimeKnown()
}

func (q *QueueSet) learnTime(ctx context.Context) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.learnTime(ctx)
	}
	return nil
}

func (q *QueueSet) readFront(ctx context.Context) (Front, error) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.readFront(ctx)
	}
	return Front{}, nil
}

func (q *QueueSet) queueNamed(name string) CancelTarget {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if g := q.current(); g.sq != nil {
		return g.sq.queueNamed(name)
	}
	return nil
}

// SetQueueState is one queue of a [QueueSet] as the set sees it.
type SetQueueState struct {
	Queue  string
	Weight int // its weight under WeightedShares; 0 otherwise
	Cap    int // 0: none
	// InHand is how many of its messages a listener holds now, received
	// and not yet let go; Received counts every message received from it.
	InHand   int
	Received int64
	// LastRead is when a receive last asked it (zero: never).
	LastRead time.Time
	// TimeInQueue is how long its messages waited before their first
	// delivery, by the service's clock (see [MessageInfo.TimeInQueue]).
	TimeInQueue Latency
	Health      ShardHealth
	// Paused is its pause as the set last read it (see [Pauser]): zero if
	// none, or if it has ended. While it holds the set reads nothing from
	// the queue.
	Paused PauseState
}

// State returns each queue's state, in order. It makes no request.
func (q *QueueSet) State() []SetQueueState {
	q.mu.RLock()
	defer q.mu.RUnlock()
	g := q.current()
	if g.sq == nil {
		return nil
	}
	counts := g.policy.Counts()
	health := g.sq.Health()
	now := time.Now()
	out := make([]SetQueueState, len(g.members))
	for i, m := range g.members {
		out[i] = SetQueueState{
			Queue: m.Queue.Name(), Weight: m.Weight, Cap: m.Cap,
			InHand: counts[i].InHand, Received: counts[i].Received, LastRead: counts[i].LastRead,
			TimeInQueue: Latency(g.waits[i].Summary(now)), Health: health[i], Paused: g.pauseOf(i),
		}
	}
	return out
}
