package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/queueerror"

	"github.com/azdispatch/azdispatch/internal/svcclock"
	"github.com/azdispatch/azdispatch/internal/syncx"
	"github.com/azdispatch/azdispatch/internal/txcount"
)

// Queue is one Azure storage queue. It is both a [Source] and a [Target], counts
// the requests made on it, and creates itself the first time a send finds
// it missing, so a healthy queue costs no extra request. A receive from a
// missing queue fails with a 404 QueueNotFound that matches [ErrFatal]: a
// listener does not create the queue it reads from unless told to (see
// [ListenerOptions.CreateQueue]).
// It is safe for concurrent use.
type Queue struct {
	name    string
	account *Account // nil for a queue opened with its own SAS URL
	client  *azqueue.QueueClient
	tx      *counter
	sent    syncx.Subscribers // woken after each send through this *Queue
	clock   *svcclock.Clock   // the service's time: its account's, set by every answer (see svcclock.Policy)
}

// sentMessage is what the service says of a message it took: its ID, the
// queue it is on (a shard's, for a [ShardedQueue]), the pop receipt that
// deletes it until it is first received, and its insertion time. A
// [Target] of your own gives the ID alone.
type sentMessage struct {
	ID       string
	Queue    string
	Receipt  string
	Inserted time.Time
	Blob     string // set by a Publisher: the payload blob of an offloaded message
}

// popReceipt is the Receipt of a [Delivery] from a [Queue]: the queue it came
// from, since a pop receipt works only there, and the receipt itself, which
// changes on every update.
type popReceipt struct {
	queue *Queue
	value string
}

var (
	_ Source       = (*Queue)(nil)
	_ Target       = (*Queue)(nil)
	_ WakeSource   = (*Queue)(nil)
	_ PoisonQueuer = (*Queue)(nil)
)

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Account returns the account the queue was opened through, or nil for a
// queue opened by its own SAS URL (see [NewQueueWithSAS]).
func (q *Queue) Account() *Account { return q.account }

// Transactions counts the requests made on this queue, by anyone in this process.
func (q *Queue) Transactions() Transactions { return q.tx.snapshot() }

// PoisonQueue implements [PoisonQueuer]: it is where a listener on q moves
// messages it gives up on, "<name>-poison" in the same account, a [*Queue]
// (assert it to peek or create). It is nil for a queue opened with
// [NewQueueWithSAS], whose token cannot reach another queue.
func (q *Queue) PoisonQueue() Shard {
	if p := q.poisonQueue(); p != nil {
		return p
	}
	return nil // not a nil *Queue in a non-nil Shard
}

// poisonQueue is [Queue.PoisonQueue] as a *Queue, nil if there is none.
func (q *Queue) poisonQueue() *Queue {
	if q.account == nil {
		return nil
	}
	// A poison queue's own name needs no room for a further suffix.
	p, err := q.account.queue(q.name+poisonSuffix, 0)
	if err != nil {
		return nil // a name that had no room for the suffix
	}
	return p
}

// Create creates the queue. It succeeds if the queue already exists.
func (q *Queue) Create(ctx context.Context) error {
	_, err := q.client.Create(tagRequest(ctx, opCreate, q.tx), nil)
	if err != nil && queueerror.HasCode(err, queueerror.QueueAlreadyExists) {
		return nil
	}
	return storageError(opCreate, q.name, err)
}

// Send puts text on the queue. It refuses, without a request, text the
// service would refuse or corrupt ([ErrMessageTooLarge], [ErrInvalidText]).
func (q *Queue) Send(ctx context.Context, text string, opts *SendOptions) (string, error) {
	m, err := q.sendMessage(ctx, text, opts)
	return m.ID, err
}

// sendMessage is [Queue.Send], with all the service says of the new message.
func (q *Queue) sendMessage(ctx context.Context, text string, opts *SendOptions) (sentMessage, error) {
	if err := checkText(text, serviceMessageLimit); err != nil {
		return sentMessage{}, err
	}
	var o azqueue.EnqueueMessageOptions
	if opts != nil {
		if err := opts.ForTarget(); err != nil {
			return sentMessage{}, err
		}
		if opts.Delay > 0 {
			o.VisibilityTimeout = to.Ptr(seconds(opts.Delay))
		}
		switch {
		case opts.TTL < 0:
			o.TimeToLive = to.Ptr(int32(-1))
		case opts.TTL > 0:
			o.TimeToLive = to.Ptr(seconds(opts.TTL))
		}
	}
	m := sentMessage{Queue: q.name}
	err := q.createIfMissing(ctx, OpSend, func(ctx context.Context) error {
		resp, err := q.client.EnqueueMessage(ctx, text, &o)
		if err == nil {
			if len(resp.Messages) > 0 && resp.Messages[0] != nil {
				e := resp.Messages[0]
				m.ID, m.Receipt, m.Inserted = deref(e.MessageID), deref(e.PopReceipt), deref(e.InsertionTime)
			}
		}
		return err
	})
	if err == nil && (opts == nil || opts.Delay == 0) {
		// A delayed message is not there to be found yet: waking a
		// listener now would only cost it an empty receive.
		q.sent.Wake()
	}
	return m, err
}

// ServiceTime is the time now on the service's clock, as the Date of the
// answers to the queue's account gave it (to the second, the header's
// unit; every answer, errors included), carried forward by the local clock;
// the local clock until the first answer. A [Publisher] reads it to hide a
// message sent with [Publisher.SendAt] for as long as the service will
// count, after one request to learn it if nothing has been asked yet.
func (q *Queue) ServiceTime() time.Time { return q.clock.Now() }

// Subscribe implements [WakeSource]: wake is called after every successful
// [Queue.Send] of a message visible at once, through this *Queue, in this process.
// Listeners on the queue subscribe when they run, so a [Publisher] in the same
// process wakes them without any request. ([Account.Queue] returns the same
// *Queue for the same name, so both sides share it.)
func (q *Queue) Subscribe(wake func()) (cancel func()) { return q.sent.Subscribe(wake) }

// Receive gets up to max (1 to [MaxBatch]) messages, hidden for visibility
// (rounded up to whole seconds, at least one). It does not create a missing
// queue: that is a [*StorageError] matching [ErrFatal].
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error) {
	if err := checkReceive(max, visibility); err != nil {
		return nil, err
	}
	opts := &azqueue.DequeueMessagesOptions{
		NumberOfMessages:  to.Ptr(int32(max)),
		VisibilityTimeout: to.Ptr(seconds(visibility)),
	}
	// Unlike Send, Receive never creates a missing queue: a listener whose
	// queue was deleted must say so (ErrFatal), not bring it back empty.
	resp, err := q.client.DequeueMessages(tagRequest(ctx, OpReceive, q.tx), opts)
	if err != nil {
		return nil, storageError(OpReceive, q.name, err)
	}
	msgs := resp.Messages
	if len(msgs) == 0 {
		q.countEmptyReceive(ctx)
		return nil, nil
	}
	// One allocation each for the deliveries and their receipts, not one
	// per message: every message of a busy listener passes through here.
	deliveries := make([]Delivery, 0, len(msgs))
	receipts := make([]popReceipt, 0, len(msgs))
	for _, m := range msgs {
		if m == nil || m.MessageID == nil || m.PopReceipt == nil {
			continue // malformed response entry: nothing can be done with it
		}
		receipts = append(receipts, popReceipt{queue: q, value: *m.PopReceipt})
		deliveries = append(deliveries, Delivery{
			ID:            *m.MessageID,
			Text:          deref(m.MessageText),
			DequeueCount:  deref(m.DequeueCount),
			InsertedAt:    deref(m.InsertionTime),
			ExpiresAt:     deref(m.ExpirationTime),
			NextVisibleAt: deref(m.TimeNextVisible),
			ReceivedAt:    deref(resp.Date),
			Queue:         q.name,
			Receipt:       &receipts[len(receipts)-1],
		})
	}
	out := make([]*Delivery, len(deliveries))
	for i := range deliveries {
		out[i] = &deliveries[i]
	}
	return out, nil
}

// Delete removes a message received from this queue.
func (q *Queue) Delete(ctx context.Context, d *Delivery) error {
	r, _, err := q.receipt(d)
	if err != nil {
		return err
	}
	_, err = q.client.DeleteMessage(tagRequest(ctx, OpDelete, q.tx), d.ID, r.value, nil)
	return storageError(OpDelete, q.name, err)
}

// SetVisibility hides a message received from this queue for after from now
// (rounded up to whole seconds; 0 releases it at once). It sends the
// message's text back unchanged, because the service replaces the text with
// whatever an update carries, and records the new pop receipt in d.
func (q *Queue) SetVisibility(ctx context.Context, d *Delivery, after time.Duration) error {
	r, held, err := q.receipt(d)
	if err != nil {
		return err
	}
	if err := checkVisibility("SetVisibility's after", after, true); err != nil {
		return err
	}
	opts := &azqueue.UpdateMessageOptions{VisibilityTimeout: to.Ptr(seconds(after))}
	resp, err := q.client.UpdateMessage(tagRequest(ctx, OpUpdate, q.tx), d.ID, r.value, d.Text, opts)
	if err != nil {
		return storageError(OpUpdate, q.name, err)
	}
	if resp.PopReceipt != nil {
		// A new receipt, not the old one changed: a copy of d made before
		// (a Delivery is a plain struct) keeps the receipt it had.
		*held = &popReceipt{queue: q, value: *resp.PopReceipt}
	}
	if resp.TimeNextVisible != nil {
		d.NextVisibleAt = *resp.TimeNextVisible
	}
	return nil
}

// Depth is the approximate number of messages in the queue, invisible ones
// included; 0 when the queue does not exist.
func (q *Queue) Depth(ctx context.Context) (int, error) {
	depth, _, err := q.properties(ctx)
	return depth, err
}

// properties reads the queue's approximate depth and whether it exists:
// one Get Queue Properties request.
func (q *Queue) properties(ctx context.Context) (depth int, exists bool, err error) {
	resp, err := q.client.GetProperties(tagRequest(ctx, OpDepth, q.tx), nil)
	switch {
	case err == nil:
		return int(deref(resp.ApproximateMessagesCount)), true, nil
	case queueerror.HasCode(err, queueerror.QueueNotFound):
		return 0, false, nil
	}
	return 0, false, storageError(OpDepth, q.name, err)
}

// Exists reports whether the queue exists: one Get Queue Properties
// request, as [Queue.Depth] makes, which cannot tell a queue that does not
// exist from an empty one. An operator's tool asks it to tell a mistyped
// name from an empty queue.
func (q *Queue) Exists(ctx context.Context) (bool, error) {
	_, exists, err := q.properties(ctx)
	return exists, err
}

// countEmptyReceive records a receive that found nothing. It is not an HTTP
// attempt of its own, so the counting policy does not see it.
func (q *Queue) countEmptyReceive(ctx context.Context) {
	q.tx.c.AddEmpty()
	if q.account != nil {
		q.account.tx.c.AddEmpty()
	}
	txcount.AddEmpty(ctx)
}

// receipt returns d's pop receipt if d came from q, directly or through
// sharded queues over q (a pop receipt only works on its own queue), and the
// field that holds it, for SetVisibility to put the next one in.
func (q *Queue) receipt(d *Delivery) (r *popReceipt, held *any, err error) {
	if d != nil {
		held = &d.Receipt
		for {
			s, ok := (*held).(*shardReceipt)
			if !ok {
				break
			}
			held = &s.inner
		}
		if r, ok := (*held).(*popReceipt); ok && r.queue == q {
			return r, held, nil
		}
	}
	return nil, nil, errors.New("azdispatch: delivery did not come from queue " + q.name)
}

// createIfMissing runs call; if the queue does not exist it creates it and
// runs call once more. Creating lazily costs one request when the queue is
// missing and none when it is there.
func (q *Queue) createIfMissing(ctx context.Context, o Op, call func(context.Context) error) error {
	tagged := tagRequest(ctx, o, q.tx)
	err := call(tagged)
	if err != nil && queueerror.HasCode(err, queueerror.QueueNotFound) {
		if cerr := q.Create(ctx); cerr != nil {
			return cerr
		}
		err = call(tagged)
	}
	return storageError(o, q.name, err)
}

// seconds converts d to the service's whole seconds, rounding up so that a
// message is never visible earlier than asked.
func seconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(s)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Host is the host of the queue's service, as [Account.Host] has it; for
// a queue opened by its own SAS URL (see [NewQueueWithSAS]), that URL's
// host, without its query.
func (q *Queue) Host() string { return hostOf(q.client.URL()) }

// serviceTimeKnown reports whether q knows the service's time from an
// answer.
func (q *Queue) serviceTimeKnown() bool { return q.clock.Known() }

// learnTime asks for the queue's properties (one Get Queue Properties,
// counted in [Transactions.Depth]) if no answer has told q the service's
// time yet: the answer's Date sets the clock, whatever it says otherwise
// (a queue that does not exist, a credential without the read permission).
// It fails only when no answer came.
func (q *Queue) learnTime(ctx context.Context) error {
	if q.clock.Known() {
		return nil
	}
	_, _, err := q.properties(ctx)
	if q.clock.Known() {
		return nil
	}
	if err == nil {
		err = errors.New("its answer carried no Date")
	}
	return fmt.Errorf("learning the service's time from queue %s: %w", q.name, err)
}
