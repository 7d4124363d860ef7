package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch/internal/latency"
	"github.com/azdispatch/azdispatch/internal/pause"
	"github.com/azdispatch/azdispatch/internal/shares"
)

// generation is a [QueueSet]'s queues from one change of them to the next:
// a fixed list has one. What was learnt of a queue (its health, its counts
// in hand and served) is carried from one generation to the next while
// the queue stays; a delivery keeps the generation it came from in its
// receipt, and is deleted through it.
type generation struct {
	sq      *ShardedQueue // nil while the set has no queues
	members []SetMember
	index   map[string]int // by queue name
	policy  *shares.Policy
	waits   []*latency.Window // per queue: first deliveries' time in queue
	sent    []*atomic.Bool    // per queue: a wake-up said it was sent to (see QueueSet.sent)
	pauses  []*pause.Gate     // per queue: its pause, nil if it cannot be paused
}

// caps are the generation's queues' capabilities.
func (g *generation) caps() []Capabilities {
	if g.sq == nil {
		return nil
	}
	return g.sq.set.caps
}

// takeWakes marks each queue a wake-up said was sent to as holding
// messages, so that this receive asks it even if it was found empty a
// moment ago: one atomic load per queue.
func (g *generation) takeWakes() {
	for i, sent := range g.sent {
		if sent.Load() && sent.CompareAndSwap(true, false) {
			g.sq.set.mu.Lock()
			g.sq.set.read[i].empty = false
			g.sq.set.mu.Unlock()
		}
	}
}

// setMembers makes members the set's queues, carrying over what was learnt
// of those that stay. It waits for receives under way to end.
func (q *QueueSet) setMembers(members []SetMember) error {
	names := map[string]bool{}
	shards := make([]Shard, len(members))
	ms := make([]shares.Member, len(members))
	for i, m := range members {
		if err := m.check(i, q.opts.Order, names); err != nil {
			return err
		}
		shards[i] = m.Queue
		ms[i] = shares.Member{Weight: max(m.Weight, 1), Cap: m.Cap}
	}
	g := &generation{members: append([]SetMember(nil), members...), index: make(map[string]int, len(members)),
		policy: shares.New(q.mode, q.opts.Aging, ms), waits: make([]*latency.Window, len(members)), sent: make([]*atomic.Bool, len(members))}
	for i, m := range members {
		g.index[m.Queue.Name()] = i
		g.waits[i] = new(latency.Window)
		sent, _ := q.sent.LoadOrStore(m.Queue.Name(), new(atomic.Bool))
		g.sent[i] = sent.(*atomic.Bool)
	}
	if len(members) > 0 {
		sq, err := NewShardedQueue(q.name, shards, &q.opts.ShardedQueueOptions)
		if err != nil {
			return err
		}
		sq.set.owner = q
		sq.readNext = 0 // the order decides, not a random start
		g.sq = sq
		g.pauses = newSetPauses(sq.set)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	g.carryFrom(q.gen)
	q.gen = g
	q.subscribe(g)
	return nil
}

// subscribe keeps the set subscribed to the wake-ups of g's queues, and of
// no other: a queue sent to is marked for the next receive, and a listener
// on the set woken. Hold q.mu.
func (q *QueueSet) subscribe(g *generation) {
	for name, cancel := range q.unsubscribe {
		if _, ok := g.index[name]; !ok {
			cancel()
			delete(q.unsubscribe, name)
			q.sent.Delete(name)
		}
	}
	for i, m := range g.members {
		name := m.Queue.Name()
		if _, ok := q.unsubscribe[name]; ok {
			continue
		}
		sent := g.sent[i]
		if subscribe := g.sq.set.caps[i].Subscribe; subscribe != nil {
			q.unsubscribe[name] = subscribe(func() {
				sent.Store(true)
				q.room.Broadcast() // a receive waiting for room reads it now
				q.wakers.Wake()
			})
		} else {
			q.unsubscribe[name] = func() {}
		}
	}
}

// carryFrom carries over what prev learnt of the queues that stay.
func (g *generation) carryFrom(prev *generation) {
	if prev == nil || prev.sq == nil || g.sq == nil {
		return
	}
	for name, to := range g.index {
		from, ok := prev.index[name]
		if !ok {
			continue
		}
		g.sq.set.carry(prev.sq.set, from, to)
		g.policy.Carry(to, prev.policy, from)
		g.waits[to] = prev.waits[from]
		if g.pauses[to] != nil && prev.pauses[from] != nil {
			g.pauses[to].CarryFrom(prev.pauses[from])
		}
	}
}

// QueueDiscovery finds the queues of a [QueueSet] by the prefix of their
// names, in an account, and finds them again on an interval: a tenant's
// queue created while a listener runs is read within Every, and one
// deleted is dropped then (until then it is backed off as a failing
// queue, a request per back-off, not an error per receive).
type QueueDiscovery struct {
	// Account is where the queues are; it needs permission to list them.
	Account *Account
	// Prefix is what their names start with. Poison queues (names ending
	// in "-poison") are left out.
	Prefix string
	// Every is how often the queues are listed again, by a receive of the
	// set once it has passed: one List Queues request. Defaults to 5
	// minutes: 12 requests an hour, a tenth of an idle listener's.
	Every time.Duration
	// Member gives a queue found its weight and cap; the set fills in its
	// Queue. Nil gives every queue weight 1 and no cap. Under
	// [StrictPriority] the queues are ordered by name: name the levels so
	// that they sort.
	Member func(name string) SetMember
}

// DiscoverQueueSet returns a set called name over the queues d finds,
// listing them once now: an error if that fails. A set with no queue yet
// receives nothing until one is found.
func DiscoverQueueSet(ctx context.Context, name string, d QueueDiscovery, opts *QueueSetOptions) (*QueueSet, error) {
	if d.Account == nil {
		return nil, &ConfigError{Field: "QueueDiscovery.Account", Reason: "nil"}
	}
	if d.Prefix == "" {
		return nil, &ConfigError{Field: "QueueDiscovery.Prefix", Reason: "empty: every queue of the account would be in the set"}
	}
	setDefault(&d.Every, 5*time.Minute)
	q, err := newQueueSet(name, opts)
	if err != nil {
		return nil, err
	}
	q.discover = &discoverer{d: d}
	if err := q.discover.run(ctx, q); err != nil {
		return nil, err
	}
	q.poison = &setPoison{set: q}
	return q, nil
}

// discoverer lists a set's queues again once its interval has passed.
type discoverer struct {
	d       QueueDiscovery
	running atomic.Bool
	next    atomic.Int64 // Unix nanoseconds, by the local clock: a local timer

	mu     sync.Mutex
	last   error           // of the last look, nil if it succeeded
	warned map[string]bool // names found that cannot be read, logged once
}

// soon has the next receive list the queues again, whatever the interval.
func (dc *discoverer) soon() { dc.next.Store(0) }

// maybe lists the queues if the interval has passed and no other receive
// is doing it. A failure is kept for Degraded and logged; the queues stay
// as they were until the next interval.
func (dc *discoverer) maybe(ctx context.Context, q *QueueSet) {
	if time.Now().UnixNano() < dc.next.Load() || !dc.running.CompareAndSwap(false, true) {
		return
	}
	defer dc.running.Store(false)
	if err := dc.run(ctx, q); err != nil && ctx.Err() == nil {
		q.opts.Logger.Warn("listing the queue set's queues failed; its queues stay as they were", "queue_set", q.name, "err", err)
	}
}

// run lists the queues and makes them the set's.
func (dc *discoverer) run(ctx context.Context, q *QueueSet) error {
	dc.next.Store(time.Now().Add(dc.d.Every).UnixNano())
	// Bounded as any request to one of the queues is: an account that does
	// not answer holds the receive that lists, and a shutdown, that long.
	lctx, cancel := context.WithTimeout(ctx, q.opts.TryTimeout)
	names, err := dc.d.Account.QueueNames(lctx, dc.d.Prefix)
	cancel()
	if err == nil {
		err = q.setMembers(dc.members(q, names))
	}
	dc.mu.Lock()
	dc.last = err
	dc.mu.Unlock()
	if err != nil {
		return fmt.Errorf("azdispatch: queue set %s: listing queues %q*: %w", q.name, dc.d.Prefix, err)
	}
	return nil
}

// members are the queues of names a set takes, in order: not poison
// queues, and not names the account refuses to open.
func (dc *discoverer) members(q *QueueSet, names []string) []SetMember {
	var out []SetMember
	for _, name := range names {
		if strings.HasSuffix(name, poisonSuffix) {
			continue
		}
		queue, err := dc.d.Account.Queue(name)
		if err != nil {
			dc.mu.Lock()
			first := !dc.warned[name]
			if dc.warned == nil {
				dc.warned = map[string]bool{}
			}
			dc.warned[name] = true
			dc.mu.Unlock()
			if first {
				q.opts.Logger.Warn("a queue found for the queue set cannot be read; it is left out", "queue_set", q.name, "queue", name, "err", err)
			}
			continue
		}
		m := SetMember{}
		if dc.d.Member != nil {
			m = dc.d.Member(name)
		}
		m.Queue = queue
		out = append(out, m)
	}
	return out
}

// failure is why the last look for the queues failed; nil if it did not.
func (dc *discoverer) failure() error {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	return dc.last
}

// PoisonQueue implements [PoisonQueuer]: each message is poisoned into its
// own queue's poison queue, and a receive from it reads the poison queues
// of the set's queues now (see [ShardedQueue.PoisonQueue]). Nil for a list
// of queues not all of which have one.
func (q *QueueSet) PoisonQueue() Shard {
	if q.poison == nil {
		return nil
	}
	return q.poison
}

// poisonOf is the poison queue of a set over a fixed list: nil unless
// every queue has one.
func (q *QueueSet) poisonOf() *setPoison {
	if q.gen.sq == nil || q.gen.sq.PoisonQueue() == nil {
		return nil
	}
	return &setPoison{set: q}
}

// setPoison is the poison queue of a [QueueSet]: the poison queues of its
// queues, as they are now, and a poison move into the one beside the
// queue a message came from, in whichever generation it was received.
type setPoison struct{ set *QueueSet }

var errNoPoisonQueues = errors.New("the queue set's queues have no poison queues")

// now is the poison queues of the set's queues now.
func (p *setPoison) now() (*ShardedQueue, error) {
	p.set.mu.RLock()
	defer p.set.mu.RUnlock()
	if g := p.set.current(); g.sq != nil {
		if pq := g.sq.poisonQueue(); pq != nil {
			return pq, nil
		}
	}
	return nil, fmt.Errorf("azdispatch: %s: %w", p.set.name, errNoPoisonQueues)
}

func (p *setPoison) Name() string { return p.set.name + poisonSuffix }

func (p *setPoison) Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error) {
	pq, err := p.now()
	if err != nil {
		return nil, err
	}
	return pq.Receive(ctx, max, visibility)
}

// viewOf is a view of the poison set d was received from.
func (p *setPoison) viewOf(d *Delivery) (*ShardedQueue, error) {
	if d == nil {
		return nil, fmt.Errorf("azdispatch: a nil delivery did not come from %s", p.Name())
	}
	if r, ok := d.Receipt.(*shardReceipt); ok && r.set.parent != nil && r.set.parent.owner == p.set {
		return r.set.anyView(), nil
	}
	return nil, fmt.Errorf("azdispatch: delivery did not come from %s", p.Name())
}

func (p *setPoison) Delete(ctx context.Context, d *Delivery) error {
	v, err := p.viewOf(d)
	if err != nil {
		return err
	}
	return v.Delete(ctx, d)
}

func (p *setPoison) SetVisibility(ctx context.Context, d *Delivery, after time.Duration) error {
	v, err := p.viewOf(d)
	if err != nil {
		return err
	}
	return v.SetVisibility(ctx, d, after)
}

func (p *setPoison) Depth(ctx context.Context) (int, error) {
	pq, err := p.now()
	if err != nil {
		return 0, err
	}
	return pq.Depth(ctx)
}

func (p *setPoison) Send(ctx context.Context, text string, opts *SendOptions) (string, error) {
	pq, err := p.now()
	if err != nil {
		return "", err
	}
	return pq.Send(ctx, text, opts)
}

// sendBeside puts a poison envelope beside the queue its message came
// from, in the generation it was received in.
func (p *setPoison) sendBeside(ctx context.Context, origin any, text string, opts *SendOptions) (string, error) {
	if r, ok := origin.(*shardReceipt); ok && r.set.owner == p.set {
		if ps := r.set.poisonSet(); ps != nil {
			// Beside its queue; if that fails, spread over the poison
			// queues of the set's queues now, as a sharded queue's are.
			id, err := ps.anyView().sendBeside(ctx, origin, text, opts)
			if err == nil || !errors.Is(err, ErrNoHealthyShard) {
				return id, err
			}
		}
	}
	pq, err := p.now()
	if err != nil {
		return "", err
	}
	return pq.sendBeside(ctx, origin, text, opts)
}

// PayloadStore is the set's store.
func (p *setPoison) PayloadStore() *PayloadStore { return p.set.PayloadStore() }

// A QueueSet's listener honours a pause of any of its queues (see
// [Pauser]): the set reads each queue's pause at most once per
// setPauseEvery, and reads no message from a queue while it is paused,
// while the others go on. A queue's pause read fails, hangs or finds the
// queue backed off as its receives would: the set goes on by what it last
// read of it.

// setPauseEvery is how often a set reads each of its queues' pauses: the
// scale interval a listener reads a single queue's pause by, by default.
const setPauseEvery = 10 * time.Second

// errBackedOff is the read of the pause of a queue that is backed off: not
// asked, so what was read before stands.
var errBackedOff = errors.New("backed off")

// newSetPauses returns a gate for each of set's shards that can be paused.
func newSetPauses(set *shardSet) []*pause.Gate {
	gates := make([]*pause.Gate, len(set.shards))
	for i := range set.shards {
		p := set.caps[i].Pauser
		if p == nil {
			continue
		}
		read := func(ctx context.Context) (pause.Reading, error) {
			if !set.admit(i, set.now()) {
				return pause.Reading{}, errBackedOff
			}
			var st PauseState
			// Within the queue's try timeout, as its receives: a hung
			// account holds up one receive of the set, once per interval.
			err := set.try(ctx, i, 0, false, func(ctx context.Context) (err error) {
				st, err = p.PauseState(ctx)
				return err
			})
			return pause.Reading{State: pause.State(st), ServiceNow: serviceTime(set.caps[i])}, err
		}
		gates[i] = pause.New(setPauseEvery, read, time.Now)
	}
	return gates
}

// pausedNow returns, by queue, whether its pause holds, reading at once
// those whose last reading is stale; nil if none holds.
func (g *generation) pausedNow(ctx context.Context) []bool {
	var wg sync.WaitGroup
	for _, gate := range g.pauses {
		if gate != nil && gate.Stale() {
			wg.Go(func() { gate.Holds(ctx) })
		}
	}
	wg.Wait()
	var paused []bool
	for i, gate := range g.pauses {
		if gate == nil {
			continue
		}
		if _, on := gate.State(); on {
			if paused == nil {
				paused = make([]bool, len(g.pauses))
			}
			paused[i] = true
		}
	}
	return paused
}

// pauseOf is queue i's pause as last read, if it holds.
func (g *generation) pauseOf(i int) PauseState {
	if g.pauses == nil || g.pauses[i] == nil {
		return PauseState{}
	}
	st, on := g.pauses[i].State()
	if !on {
		return PauseState{}
	}
	return PauseState(st)
}
