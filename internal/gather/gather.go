// Package gather forms batches of members that arrive one by one: a batch
// closes once it holds MaxItems members, once MaxWait has passed since its
// first member came, or, without a wait, once nobody else of its group
// (the messages of one receive) is still on the way: without a wait, a
// batch holds members of one group only. A closed batch
// is handed to a starter, which calls it and gives each member its outcome.
//
// A member that stops on its way to wait (for a key's place, a rate
// limit's turn, memory) leaves its group first: a batch never waits for a
// member that waits for something else, which could be a place held by the
// batch itself.
package gather

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Options are how batches form.
type Options struct {
	// MaxItems is the most members of a batch.
	MaxItems int
	// MaxWait is the longest a batch waits for more members after its
	// first; zero closes it once its members' groups have nobody on the way.
	MaxWait time.Duration
	// ByKey keeps the members of one key in batches of their own.
	ByKey bool
	// GroupWait, without a MaxWait, is the longest a batch waits for the
	// rest of its group after its first member came; zero waits as long
	// as any is on the way. It bounds what a member stuck on its way (a
	// request that hangs) costs the others.
	GroupWait time.Duration
}

// ErrStopped is the outcome of the members of a batch that was open when
// the gatherer stopped.
var ErrStopped = errors.New("gather: stopped before the batch was called")

// Gatherer forms batches of M. Its methods are safe to call at once.
type Gatherer[M any] struct {
	opts  Options
	start func(*Batch[M])

	mu      sync.Mutex
	open    map[slot]*Batch[M]
	stopped error
}

// slot is what an open batch gathers: a key's messages (all, without
// ByKey), of one group (one receive) without a wait.
type slot struct {
	group *Group
	key   string
}

// New returns a gatherer that hands each batch that closes to start. It is
// called with the gatherer's lock held, so that no batch starts once Stop
// has returned: it must start the call and return, without calling the
// gatherer; the call ends with Finish.
func New[M any](opts Options, start func(*Batch[M])) *Gatherer[M] {
	return &Gatherer[M]{opts: opts, start: start, open: map[slot]*Batch[M]{}}
}

// Group counts the members of one receive still on their way to a batch.
type Group struct {
	onWay   atomic.Int64
	settled func(*Group)
}

// NewGroup returns a group with n members on their way, or nil when
// batches wait for MaxWait rather than for groups.
func (g *Gatherer[M]) NewGroup(n int) *Group {
	if g.opts.MaxWait > 0 {
		return nil
	}
	gr := &Group{settled: g.groupSettled}
	gr.onWay.Store(int64(n))
	return gr
}

// Add counts n more members on their way in gr (nil: none is counted).
func (gr *Group) Add(n int) {
	if gr != nil {
		gr.onWay.Add(int64(n))
	}
}

// leave counts one member of gr off its way.
func (gr *Group) leave() {
	if gr.onWay.Add(-1) == 0 {
		gr.settled(gr)
	}
}

// Seat is one member's place in its group: counted on the way until it
// joins a batch, ends, or stops to wait (Leave), whichever is first.
type Seat struct {
	group *Group
	on    atomic.Bool
}

// Sit puts s on its way in gr, which has counted it already (NewGroup or
// Add). A nil gr counts nothing.
func (s *Seat) Sit(gr *Group) {
	s.group = gr
	s.on.Store(gr != nil)
}

// Leave takes s off its way, once; later calls do nothing.
func (s *Seat) Leave() {
	if s.on.CompareAndSwap(true, false) {
		s.group.leave()
	}
}

// Join adds m to the open batch of key (every member shares one without
// ByKey) and, without a wait, of seat's group, and returns the batch and
// m's place in it. It takes seat off its way. It returns nil once the
// gatherer has stopped.
func (g *Gatherer[M]) Join(key string, seat *Seat, m M) (*Batch[M], int) {
	at := slot{key: key}
	if !g.opts.ByKey {
		at.key = ""
	}
	if g.opts.MaxWait == 0 {
		at.group = seat.group
	}
	g.mu.Lock()
	if g.stopped != nil {
		g.mu.Unlock()
		seat.Leave()
		return nil, 0
	}
	b := g.open[at]
	if b == nil {
		b = &Batch[M]{Key: at.key, at: at, done: make(chan struct{})}
		g.open[at] = b
		if wait := g.opts.MaxWait; wait > 0 || g.opts.GroupWait > 0 {
			if wait == 0 {
				wait = g.opts.GroupWait
			}
			b.timer = time.AfterFunc(wait, func() { g.expire(b) })
		}
	}
	i := len(b.members)
	b.members = append(b.members, m)
	leaving := seat.on.CompareAndSwap(true, false)
	// A member that was not on its way (it waited for something) closes
	// the batch here if nobody of its group is on the way; one that was
	// closes it as it leaves its group (groupSettled).
	if len(b.members) >= g.opts.MaxItems || !leaving && g.opts.MaxWait == 0 && b.settled() {
		g.closeLocked(b)
		g.start(b)
	}
	g.mu.Unlock()
	if leaving {
		seat.group.leave()
	}
	return b, i
}

// groupSettled closes the open batches of gr, which has nobody on the
// way now.
func (g *Gatherer[M]) groupSettled(gr *Group) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for at, b := range g.open {
		if at.group == gr {
			g.closeLocked(b)
			g.start(b)
		}
	}
}

// expire closes b at MaxWait, or at GroupWait, if it is still open.
func (g *Gatherer[M]) expire(b *Batch[M]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[b.at] == b {
		g.closeLocked(b)
		g.start(b)
	}
}

// closeLocked takes b out of the open batches.
func (g *Gatherer[M]) closeLocked(b *Batch[M]) {
	delete(g.open, b.at)
	if b.timer != nil {
		b.timer.Stop()
	}
}

// Stop ends every open batch with err (ErrStopped if nil) as each
// member's outcome, uncalled; Join returns nil from now on. Batches
// already closed are called as usual.
func (g *Gatherer[M]) Stop(err error) {
	if err == nil {
		err = ErrStopped
	}
	g.mu.Lock()
	g.stopped = err
	var ended []*Batch[M]
	for _, b := range g.open {
		g.closeLocked(b)
		ended = append(ended, b)
	}
	g.mu.Unlock()
	for _, b := range ended {
		b.FinishAll(err)
	}
}

// Open is how many batches are open now.
func (g *Gatherer[M]) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

// Batch is members gathered for one call.
type Batch[M any] struct {
	Key string // the members' key with ByKey; "" without

	at      slot
	members []M
	timer   *time.Timer

	mu       sync.Mutex
	begun    bool
	gone     map[int]bool
	called   []int // the members given to the call, by place
	outcomes []error
	done     chan struct{}
}

// settled reports whether b's group, if it has one, has nobody on the way.
func (b *Batch[M]) settled() bool {
	return b.at.group == nil || b.at.group.onWay.Load() == 0
}

// Leave takes member i out of b if its call has not begun, and reports
// whether it did: a member that stops waiting (its own context ended) is
// then not called. Once the call has begun, the member is in it.
func (b *Batch[M]) Leave(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.begun {
		return false
	}
	if b.gone == nil {
		b.gone = map[int]bool{}
	}
	b.gone[i] = true
	return true
}

// Begin returns the members to call, in the order they joined, those that
// left excluded; Finish takes their outcomes in the same order.
func (b *Batch[M]) Begin() []M {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.begun = true
	ms := make([]M, 0, len(b.members))
	for i, m := range b.members {
		if !b.gone[i] {
			ms = append(ms, m)
			b.called = append(b.called, i)
		}
	}
	return ms
}

// Finish gives the members Begin returned their outcomes: errs[i] is the
// i-th's, and a nil errs is success for all.
func (b *Batch[M]) Finish(errs []error) {
	b.mu.Lock()
	b.outcomes = make([]error, len(b.members))
	if errs != nil {
		for j, i := range b.called {
			b.outcomes[i] = errs[j]
		}
	}
	b.mu.Unlock()
	close(b.done)
}

// FinishAll gives every member err as its outcome, called or not.
func (b *Batch[M]) FinishAll(err error) {
	b.mu.Lock()
	b.outcomes = make([]error, len(b.members))
	for i := range b.outcomes {
		b.outcomes[i] = err
	}
	b.mu.Unlock()
	close(b.done)
}

// Called reports whether member i was given to the call (Begin): false
// for one that left first, or if the call never began.
func (b *Batch[M]) Called(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.begun && !b.gone[i]
}

// Done is closed once b's outcomes are in.
func (b *Batch[M]) Done() <-chan struct{} { return b.done }

// Outcome is member i's outcome, once Done is closed.
func (b *Batch[M]) Outcome(i int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outcomes[i]
}
