package memqueue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/pause"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/txcount"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Limits of the service that a queue enforces.
const (
	// MaxTextSize is the largest message text, in UTF-8 bytes.
	MaxTextSize = 64 * 1024
	// DefaultTTL is how long a message lives unless its send says otherwise.
	DefaultTTL = 7 * 24 * time.Hour
)

// Options configures a [Queue]. Nil, or a zero field, means the default.
type Options struct {
	// Clock tells the queue the time. Defaults to the system's clock.
	Clock Clock
	// Intercept, if set, is called before every call on the queue, and
	// every request on its payload store (see [Queue.PayloadStore]), outside
	// its lock, with the queue's name and the kind of call; an error fails
	// the call before it acts. It lets a test model throttling or an
	// outage of its own, beside [Queue.FailNext] and [Queue.LoseNext].
	Intercept func(ctx context.Context, queue string, op azdispatch.Op) error
	// Payloads, if set, is the payload store the queue offers (see
	// [Queue.PayloadStore]): one store shared by several queues, as the
	// queues of one account share a container. Its requests then pass
	// through the fault hooks of the queue that made it, not this one's.
	// Defaults to a store of the queue's own, in memory, on its clock.
	Payloads *azdispatch.PayloadStore
	// Shuffle, if set, makes a receive take the visible messages in a
	// random order drawn from it, rather than oldest first: the service
	// is only typically first in, first out, and a test of code that must
	// not rely on the order (see [azdispatch.LimitOptions.InOrder]) sees
	// the worst of it. It is used under the queue's lock only.
	Shuffle *rand.Rand
}

// Queue is an in-memory queue with the semantics of an Azure storage queue
// (see the package documentation). It is safe for concurrent use.
type Queue struct {
	name      string
	clock     Clock
	intercept func(context.Context, string, azdispatch.Op) error
	idPrefix  string

	mu       sync.Mutex
	messages messageHeap // every message, by when it is next visible
	byID     map[string]*message
	nextID   uint64
	order    uint64 // breaks ties between messages visible at the same time, oldest first
	faults   faults
	poison   *Queue
	shuffle  *rand.Rand // Options.Shuffle
	pause    pause.State

	store     *azdispatch.PayloadStore
	blobCalls [numBlobOps]atomic.Int64 // requests on the store this queue made, by blobIndex

	sent          syncx.Subscribers // woken by sends of visible messages and releases
	calls         [numOps]atomic.Int64
	emptyReceives atomic.Int64
}

var (
	_ azdispatch.Shard         = (*Queue)(nil)
	_ azdispatch.WakeSource    = (*Queue)(nil)
	_ azdispatch.PayloadStorer = (*Queue)(nil)
	_ azdispatch.CancelTarget  = (*Queue)(nil)
)

// New returns an empty queue. Nil opts means defaults.
func New(name string, opts *Options) *Queue {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	q := &Queue{
		name: name, clock: o.Clock, intercept: o.Intercept, shuffle: o.Shuffle,
		idPrefix: fmt.Sprintf("%08x", rand.Uint32()), byID: map[string]*message{},
	}
	var moved func(func()) func()
	if mc, ok := o.Clock.(*ManualClock); ok {
		// Messages may have become visible: let listeners look.
		mc.subscribe(q.sent.Wake)
		moved = mc.subscribe
	}
	q.store = o.Payloads
	if q.store == nil {
		// The account's default container name: a valid name cannot fail.
		q.store, _ = azdispatch.NewMemoryPayloadStore(azdispatch.DefaultPayloadContainer, &azdispatch.MemoryPayloadStoreOptions{
			Now: o.Clock.Now, Moved: moved, Intercept: q.blobRequest,
		})
	}
	return q
}

// message is one message in a queue.
type message struct {
	id        string
	text      string
	inserted  time.Time
	expires   time.Time // zero: never
	visibleAt time.Time
	order     uint64
	dequeues  int64
	receipt   uint64 // the current pop receipt
	// sentReceipt is the receipt its send was answered with: current
	// until a receive or update.
	sentReceipt uint64
	index       int // in the heap
}

// receipt is a Delivery's Receipt: the message and the pop receipt it was
// given, which a later receive or update makes stale.
type receipt struct {
	q   *Queue
	m   *message
	pop uint64
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Subscribe implements [azdispatch.WakeSource]: wake is called after every
// send of a message visible at once, every release (SetVisibility 0), and
// every Advance of a [ManualClock] the queue is on.
func (q *Queue) Subscribe(wake func()) (cancel func()) { return q.sent.Subscribe(wake) }

// PoisonQueue implements [azdispatch.PoisonQueuer]: the queue
// "<name>-poison" on the same clock, made on first use, where a Listener on
// q, or a ShardedQueue over it, moves the messages it gives up on. It is a
// [*Queue] (assert it to inject faults into it).
func (q *Queue) PoisonQueue() azdispatch.Shard { return q.poisonQueue() }

func (q *Queue) poisonQueue() *Queue {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.poison == nil {
		// The same store: a poison envelope keeps its message's pointer.
		q.poison = New(q.name+"-poison", &Options{Clock: q.clock, Intercept: q.intercept, Payloads: q.store})
	}
	return q.poison
}

// Send puts text on the queue and returns the new message's ID. Like an
// [azdispatch.Queue], it refuses text over 64 KiB
// (*[azdispatch.MessageTooLargeError]) or that XML cannot carry
// ([azdispatch.ErrInvalidText]), a delay outside 0 to 7 days, and the
// options only a Publisher carries out (*[azdispatch.ConfigError]), before
// any request; like the service, it
// answers a delay not shorter than a positive TTL with 400
// InvalidQueryParameterValue.
func (q *Queue) Send(ctx context.Context, text string, opts *azdispatch.SendOptions) (string, error) {
	fail := func(err error) (string, error) { return "", err }
	if len(text) > MaxTextSize {
		return fail(&azdispatch.MessageTooLargeError{Size: len(text), Limit: MaxTextSize})
	}
	if err := xmltext.Check(text); err != nil {
		return fail(err)
	}
	var delay, ttl time.Duration
	if opts != nil {
		if err := opts.ForTarget(); err != nil {
			return fail(err)
		}
		delay, ttl = opts.Delay, opts.TTL
	}
	if err := q.before(ctx, azdispatch.OpSend); err != nil {
		return fail(err)
	}
	if ttl > 0 && wholeSeconds(delay) >= wholeSeconds(ttl) {
		// The service takes the request, and refuses a message that would
		// expire before anyone could see it.
		return fail(q.storageError(azdispatch.OpSend, http.StatusBadRequest, "InvalidQueryParameterValue",
			fmt.Errorf("memqueue: delay %v must be shorter than the TTL %v", delay, ttl)))
	}
	q.mu.Lock()
	now := q.clock.Now()
	q.nextID++
	m := &message{
		id:        fmt.Sprintf("%s-0000-4000-8000-%012x", q.idPrefix, q.nextID),
		text:      text,
		inserted:  now,
		visibleAt: now.Add(wholeSeconds(delay)),
	}
	switch {
	case ttl == 0:
		m.expires = now.Add(DefaultTTL)
	case ttl > 0:
		m.expires = now.Add(wholeSeconds(ttl))
	}
	// A receipt of its own from the start, as the service's answer
	// gives one: what deletes it until it is received.
	m.receipt = q.newReceipt()
	m.sentReceipt = m.receipt
	q.push(m)
	q.byID[m.id] = m
	lost := q.lost(azdispatch.OpSend)
	q.mu.Unlock()
	if delay == 0 {
		q.sent.Wake()
	}
	if lost {
		return fail(q.lostError(azdispatch.OpSend))
	}
	return m.id, nil
}

// SentReceipt implements [azdispatch.CancelTarget]: the pop receipt the
// send of message id was answered with, which [Queue.DeleteSent] takes
// until a receive or update gives the message another, and its insertion
// time as the service reports it; ok is false for a message the queue
// no longer holds.
func (q *Queue) SentReceipt(id string) (receipt string, inserted time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.byID[id]
	if m == nil {
		return "", time.Time{}, false
	}
	return strconv.FormatUint(m.sentReceipt, 10), reported(m.inserted), true
}

// DeleteSent implements [azdispatch.CancelTarget]: it deletes message id by
// the pop receipt its send was answered with ([Queue.SentReceipt]). A receipt a
// receive or update made stale, or a message gone, is refused with 404
// MessageNotFound, which matches [azdispatch.ErrOwnershipLost].
func (q *Queue) DeleteSent(ctx context.Context, id, popReceipt string) error {
	pop, err := strconv.ParseUint(popReceipt, 10, 64)
	if err != nil {
		return q.storageError(azdispatch.OpDelete, http.StatusBadRequest, "InvalidQueryParameterValue",
			fmt.Errorf("memqueue: %q is not a pop receipt of queue %s", popReceipt, q.name))
	}
	if err := q.before(ctx, azdispatch.OpDelete); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.byID[id]
	if m == nil {
		return q.storageError(azdispatch.OpDelete, http.StatusNotFound, "MessageNotFound",
			fmt.Errorf("memqueue: message %s is gone", id))
	}
	r := &receipt{q: q, m: m, pop: pop}
	if err := q.check(r, azdispatch.OpDelete); err != nil {
		return err
	}
	q.remove(m)
	if q.lost(azdispatch.OpDelete) {
		return q.lostError(azdispatch.OpDelete)
	}
	return nil
}

// Receive gets up to max (1 to 32) visible messages and hides them for
// visibility (1 s to 7 days, rounded up to whole seconds).
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*azdispatch.Delivery, error) {
	if max < 1 || max > azdispatch.MaxBatch {
		return nil, q.storageError(azdispatch.OpReceive, http.StatusBadRequest, "OutOfRangeQueryParameterValue",
			fmt.Errorf("memqueue: receive of %d messages: must be 1 to %d", max, azdispatch.MaxBatch))
	}
	if visibility <= 0 || visibility > azdispatch.MaxVisibility {
		return nil, q.storageError(azdispatch.OpReceive, http.StatusBadRequest, "OutOfRangeQueryParameterValue",
			fmt.Errorf("memqueue: receive visibility %v: must be more than 0 and at most 7 days", visibility))
	}
	if err := q.before(ctx, azdispatch.OpReceive); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	hidden := now.Add(wholeSeconds(visibility))
	received := reported(now)
	var out []*azdispatch.Delivery
	var deliveries []azdispatch.Delivery
	var receipts []receipt
	var visible []*message // with Shuffle: the visible messages not taken yet
	if q.shuffle != nil {
		visible = q.visibleAt(now)
	}
	for len(out) < max {
		var m *message
		if q.shuffle != nil {
			if len(visible) == 0 {
				break
			}
			i := q.shuffle.IntN(len(visible))
			m, visible[i] = visible[i], visible[len(visible)-1]
			visible = visible[:len(visible)-1]
		} else {
			if len(q.messages) == 0 || q.messages[0].visibleAt.After(now) {
				break
			}
			m = q.messages[0]
		}
		if q.expired(m, now) {
			q.remove(m)
			continue
		}
		if out == nil {
			// One allocation each for the batch, however many it holds.
			n := min(max, len(q.messages))
			out = make([]*azdispatch.Delivery, 0, n)
			deliveries = make([]azdispatch.Delivery, 0, n)
			receipts = make([]receipt, 0, n)
		}
		m.dequeues++
		m.receipt = q.newReceipt()
		m.visibleAt = hidden
		q.requeue(m)
		receipts = append(receipts, receipt{q: q, m: m, pop: m.receipt})
		deliveries = append(deliveries, q.delivery(m, &receipts[len(receipts)-1], received))
		out = append(out, &deliveries[len(deliveries)-1])
	}
	if q.lost(azdispatch.OpReceive) {
		return nil, q.lostError(azdispatch.OpReceive)
	}
	if len(out) == 0 {
		q.emptyReceives.Add(1)
		txcount.AddEmpty(ctx)
	}
	return out, nil
}

// Delete removes a received message. A stale pop receipt (the message was
// received again or updated since, or is gone) is refused with 404
// MessageNotFound, which matches [azdispatch.ErrOwnershipLost].
func (q *Queue) Delete(ctx context.Context, d *azdispatch.Delivery) error {
	r, err := q.receiptOf(d, azdispatch.OpDelete)
	if err != nil {
		return err
	}
	if err := q.before(ctx, azdispatch.OpDelete); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(r, azdispatch.OpDelete); err != nil {
		return err
	}
	q.remove(r.m)
	if q.lost(azdispatch.OpDelete) {
		return q.lostError(azdispatch.OpDelete)
	}
	return nil
}

// SetVisibility hides a received message for after from now (0 to 7 days,
// rounded up to whole seconds; 0 makes it visible at once), storing d.Text
// as its text as the service's Update Message does, and puts the new pop receipt and the time it is next visible in d.
func (q *Queue) SetVisibility(ctx context.Context, d *azdispatch.Delivery, after time.Duration) error {
	r, err := q.receiptOf(d, azdispatch.OpUpdate)
	if err != nil {
		return err
	}
	if after < 0 || after > azdispatch.MaxVisibility {
		return q.storageError(azdispatch.OpUpdate, http.StatusBadRequest, "OutOfRangeQueryParameterValue",
			fmt.Errorf("memqueue: visibility %v: must be between 0 and 7 days", after))
	}
	if err := q.before(ctx, azdispatch.OpUpdate); err != nil {
		return err
	}
	q.mu.Lock()
	if err := q.check(r, azdispatch.OpUpdate); err != nil {
		q.mu.Unlock()
		return err
	}
	m := r.m
	m.text = d.Text
	m.receipt = q.newReceipt()
	m.visibleAt = q.clock.Now().Add(wholeSeconds(after))
	q.requeue(m)
	next := &receipt{q: q, m: m, pop: m.receipt}
	visibleAt := m.visibleAt
	lost := q.lost(azdispatch.OpUpdate)
	q.mu.Unlock()
	if after == 0 {
		q.sent.Wake()
	}
	if lost {
		// The update happened: the receipt d holds is stale now.
		return q.lostError(azdispatch.OpUpdate)
	}
	d.Receipt, d.NextVisibleAt = next, reported(visibleAt)
	return nil
}

// Peek returns up to max visible messages from the front of the queue
// without receiving them, as [azdispatch.Queue.Peek] does: they keep their
// visibility and dequeue count, and have no Receipt. ReceivedAt is the
// clock's time, to the second, as a peek answer's Date. It is counted in
// Transactions' Other.
func (q *Queue) Peek(ctx context.Context, max int) ([]*azdispatch.Delivery, error) {
	if max < 1 || max > azdispatch.MaxBatch {
		return nil, q.storageError(opPeek, http.StatusBadRequest, "OutOfRangeQueryParameterValue",
			fmt.Errorf("memqueue: peek of %d messages: must be 1 to %d", max, azdispatch.MaxBatch))
	}
	if err := q.before(ctx, opPeek); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	out := []*azdispatch.Delivery{}
	// The heap's elements in order, from its root: each taken one's
	// children become candidates. It looks at no more than it returns
	// (and the expired ones it passes), not at the whole queue.
	next := &indexHeap{h: q.messages}
	if len(q.messages) > 0 {
		heap.Push(next, 0)
	}
	for next.Len() > 0 && len(out) < max {
		i := heap.Pop(next).(int)
		m := q.messages[i]
		if m.visibleAt.After(now) {
			break
		}
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(q.messages) {
				heap.Push(next, c)
			}
		}
		if q.expired(m, now) {
			continue
		}
		d := q.delivery(m, nil, reported(now))
		d.Receipt, d.NextVisibleAt = nil, time.Time{}
		out = append(out, &d)
	}
	if q.lost(opPeek) {
		return nil, q.lostError(opPeek)
	}
	return out, nil
}

// Depth is the number of messages in the queue, invisible ones included
// (and expired ones not yet removed, as the service's approximate count).
func (q *Queue) Depth(ctx context.Context) (int, error) {
	if err := q.before(ctx, azdispatch.OpDepth); err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lost(azdispatch.OpDepth) {
		return 0, q.lostError(azdispatch.OpDepth)
	}
	return len(q.messages), nil
}

// Transactions counts the calls made on the queue that would have been
// requests to the service, by kind, as an [azdispatch.Queue] counts every
// attempt: a call refused by a fault hook is counted (the service bills a
// throttled request), a call whose arguments an azdispatch.Queue would
// refuse before any request is not. EmptyReceive counts the receives that
// returned nothing. Each call is also counted in every count
// its context carries ([azdispatch.CountTransactions]), so a Listener's
// State().Transactions counts its requests on a memqueue as on a Queue.
// The requests on its payload store (see [Queue.PayloadStore]) count as
// BlobRead, BlobWrite, BlobDelete, BlobList and BlobLease, as an account's
// would.
func (q *Queue) Transactions() azdispatch.Transactions {
	return azdispatch.Transactions{
		BlobRead:     q.blobCalls[blobIndex(OpBlobRead)].Load(),
		BlobWrite:    q.blobCalls[blobIndex(OpBlobWrite)].Load(),
		BlobDelete:   q.blobCalls[blobIndex(OpBlobDelete)].Load(),
		BlobList:     q.blobCalls[blobIndex(OpBlobList)].Load(),
		BlobLease:    q.blobCalls[blobIndex(OpBlobLease)].Load(),
		Send:         q.calls[opIndex(azdispatch.OpSend)].Load(),
		Receive:      q.calls[opIndex(azdispatch.OpReceive)].Load(),
		EmptyReceive: q.emptyReceives.Load(),
		Delete:       q.calls[opIndex(azdispatch.OpDelete)].Load(),
		Update:       q.calls[opIndex(azdispatch.OpUpdate)].Load(),
		Depth:        q.calls[opIndex(azdispatch.OpDepth)].Load(),
		Other:        q.calls[opIndex(opPeek)].Load(),
	}
}

// delivery is what a receive at the reported time received returns for m.
func (q *Queue) delivery(m *message, r *receipt, received time.Time) azdispatch.Delivery {
	return azdispatch.Delivery{
		ID: m.id, Text: m.text, DequeueCount: m.dequeues,
		InsertedAt: reported(m.inserted), ExpiresAt: reported(expiresAt(m)), NextVisibleAt: reported(m.visibleAt),
		ReceivedAt: received, Queue: q.name, Receipt: r,
	}
}

// PayloadStore implements [azdispatch.PayloadStorer]: the queue's payload
// store, in memory on its clock, where a Publisher to q offloads batches
// and large messages, and keeps the records of cancels and unique keys; a
// Scheduler keeps its schedules' state; and a Listener of q reads them
// back and marks the scheduled messages it delivered. Its requests pass
// through the queue's fault hooks ([Queue.FailNext], [Queue.LoseNext],
// [Options.Intercept]) as the blob [azdispatch.Op]s OpBlobRead,
// OpBlobWrite, OpBlobDelete, OpBlobList and OpBlobLease (a key's lease,
// [azdispatch.LimitOptions.AcrossInstances]).
func (q *Queue) PayloadStore() *azdispatch.PayloadStore { return q.store }

// ServiceTime is the time on the queue's clock, which stands for the
// service's: what a publisher hides a message sent with
// [azdispatch.Publisher.SendAt] by.
func (q *Queue) ServiceTime() time.Time { return q.clock.Now() }

// receiptOf returns d's receipt if it came from q.
func (q *Queue) receiptOf(d *azdispatch.Delivery, op azdispatch.Op) (*receipt, error) {
	if d != nil {
		if r, ok := d.Receipt.(*receipt); ok && r.q == q {
			return r, nil
		}
	}
	return nil, q.storageError(op, http.StatusBadRequest, "InvalidQueryParameterValue",
		errors.New("memqueue: delivery did not come from queue "+q.name))
}

// check refuses a stale receipt as the service does. The caller holds q.mu.
func (q *Queue) check(r *receipt, op azdispatch.Op) error {
	m := r.m
	if m.index < 0 || m.receipt != r.pop || q.expired(m, q.clock.Now()) {
		return q.storageError(op, http.StatusNotFound, "MessageNotFound",
			fmt.Errorf("memqueue: message %s: pop receipt is stale or the message is gone", m.id))
	}
	return nil
}

func (q *Queue) expired(m *message, now time.Time) bool {
	return !m.expires.IsZero() && !now.Before(m.expires)
}

// newReceipt returns a pop receipt no message of q has had. The caller
// holds q.mu.
func (q *Queue) newReceipt() uint64 {
	q.order++
	return q.order
}

// push adds m to the queue. The caller holds q.mu.
func (q *Queue) push(m *message) {
	q.order++
	m.order = q.order
	heap.Push(&q.messages, m)
}

// requeue puts m, whose visibleAt changed, back in its place, after the
// messages visible at the same time. The caller holds q.mu.
func (q *Queue) requeue(m *message) {
	q.order++
	m.order = q.order
	heap.Fix(&q.messages, m.index)
}

// visibleAt returns the messages visible at now, in no order. The caller
// holds q.mu.
func (q *Queue) visibleAt(now time.Time) []*message {
	var out []*message
	for _, m := range q.messages {
		if !m.visibleAt.After(now) {
			out = append(out, m)
		}
	}
	return out
}

// remove takes m out of the queue. The caller holds q.mu.
func (q *Queue) remove(m *message) {
	heap.Remove(&q.messages, m.index)
	delete(q.byID, m.id)
}

// expiresAt is a message's expiry as the service reports it: for one that
// never expires, the last day of 9999.
func expiresAt(m *message) time.Time {
	if m.expires.IsZero() {
		return time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	}
	return m.expires
}

// reported is t as the service reports a time: in UTC, to the whole second
// (its responses carry RFC 1123 dates). The queue keeps its own times
// exact; only what it reports is cut.
func reported(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// wholeSeconds rounds d up to whole seconds, the service's unit.
func wholeSeconds(d time.Duration) time.Duration {
	s := math.Ceil(d.Seconds())
	return time.Duration(s) * time.Second
}

// numOps is the number of kinds of call counted.
const numOps = 6

// opPeek is a peek's kind, which the service bills as "other" (there is
// no exported Op for it: a listener never peeks).
const opPeek azdispatch.Op = "peek"

func opIndex(op azdispatch.Op) int {
	switch op {
	case azdispatch.OpSend:
		return 0
	case azdispatch.OpReceive:
		return 1
	case azdispatch.OpDelete:
		return 2
	case azdispatch.OpUpdate:
		return 3
	case opPeek, opSetMetadata:
		return 5
	}
	return 4
}

// indexHeap is a heap of places in h, in h's order: a walk of h in
// order without taking from it.
type indexHeap struct {
	h   messageHeap
	idx []int
}

func (x *indexHeap) Len() int           { return len(x.idx) }
func (x *indexHeap) Less(i, j int) bool { return x.h.Less(x.idx[i], x.idx[j]) }
func (x *indexHeap) Swap(i, j int)      { x.idx[i], x.idx[j] = x.idx[j], x.idx[i] }
func (x *indexHeap) Push(v any)         { x.idx = append(x.idx, v.(int)) }
func (x *indexHeap) Pop() any {
	v := x.idx[len(x.idx)-1]
	x.idx = x.idx[:len(x.idx)-1]
	return v
}

// messageHeap orders messages by when they are next visible, then by when
// they were put in that place; its methods implement heap.Interface.
type messageHeap []*message

func (h messageHeap) Len() int { return len(h) }
func (h messageHeap) Less(i, j int) bool {
	if !h[i].visibleAt.Equal(h[j].visibleAt) {
		return h[i].visibleAt.Before(h[j].visibleAt)
	}
	return h[i].order < h[j].order
}
func (h messageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *messageHeap) Push(x any) {
	m := x.(*message)
	m.index = len(*h)
	*h = append(*h, m)
}
func (h *messageHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	m.index = -1
	*h = old[:len(old)-1]
	return m
}
