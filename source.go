package azdispatch

import (
	"context"
	"fmt"
	"time"
)

// Source is what a [Listener] receives from: a [Queue], a [ShardedQueue], or a
// source of your own (a wrapper that traces or injects faults, a stand-in for
// tests). The sources of this package are safe for concurrent use.
//
// A source may offer more than these methods: a Peek, a poison queue beside
// it, a payload store, wake-ups, and others. [Capabilities] lists every
// optional method and what each enables; package sourcetest checks a
// source of your own against the contract, and says which it offers. A
// wrapper offers only the optional methods it has itself: one that should
// pass on those of what it wraps has them too.
//
// A wrapper passes the context its methods are given on to what it wraps
// (or a context made from it): a [Listener]'s Receive carries in it what a
// [ShardedQueue] inside reports back, shards it could not ask or that
// failed, and a [Queue]'s requests carry their own settings for the
// storage client.
type Source interface {
	// Name identifies the source in logs, errors and poison envelopes.
	Name() string
	// Receive gets up to max messages (1 to [MaxBatch]) and hides them for
	// visibility. It returns an empty slice, not an error, when there are
	// none. Messages it returns with an error are handled all the same
	// (they are hidden already), and the error counts as a failed receive;
	// more than max are made visible again at once.
	Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error)
	// Delete removes a received message. A stale receipt gives an error
	// matching [ErrOwnershipLost].
	Delete(ctx context.Context, d *Delivery) error
	// SetVisibility hides a received message for after from now (0 makes it
	// visible at once), storing d.Text as its text (the service replaces a
	// message's text on every update), and records in d what a later
	// Delete or SetVisibility needs (a pop receipt changes on every update).
	// A listener changes d.Text only to count a hop of a message not yet
	// due (see [Publisher.SendAfter]).
	SetVisibility(ctx context.Context, d *Delivery, after time.Duration) error
	// Depth is the approximate number of messages, invisible ones included.
	Depth(ctx context.Context) (int, error)
}

// Target is what messages are sent to: a [Queue], or several behind one.
type Target interface {
	Name() string // identifies the target in logs and errors
	// Send puts text on the queue and returns the new message's ID.
	Send(ctx context.Context, text string, opts *SendOptions) (string, error)
}

// KeyedTarget is a [Target] that keeps a key's messages together (a
// [ShardedQueue] on one shard).
type KeyedTarget interface {
	Target
	// SendKeyed puts text where every message with this key goes.
	SendKeyed(ctx context.Context, key, text string, opts *SendOptions) (string, error)
}

// PoisonQueuer is a [Shard] with a poison queue beside it (a [*Queue] of an
// [Account], a [*ShardedQueue], a memqueue.Queue), which a [Listener] on it
// uses by default (see [ListenerOptions.PoisonQueue]).
type PoisonQueuer interface {
	// PoisonQueue returns the poison queue, or a nil interface if none.
	PoisonQueue() Shard
}

// PayloadStorer is a [Source] or [Target] with a [PayloadStore] of its own
// (a [*Queue] of an [Account], a [ShardedQueue], a memqueue.Queue): a
// [Publisher] offloads to it, and a [Listener] reads from it, unless their
// options name another. A wrapper passes it on by implementing it too.
type PayloadStorer interface {
	// PayloadStore returns the store, or nil if there is none.
	PayloadStore() *PayloadStore
}

// WakeSource tells its subscribers that work was sent: a [*Queue] after each
// [Queue.Send] through it here, an [endpoint.WakeHandler] from elsewhere.
//
// [endpoint.WakeHandler]: https://pkg.go.dev/github.com/azdispatch/azdispatch/endpoint#WakeHandler
type WakeSource interface {
	// Subscribe registers wake, to be called (quickly, without blocking)
	// whenever work is sent; cancel removes it.
	Subscribe(wake func()) (cancel func())
}

// SendOptions are the per-message options of a send. Nil means defaults.
// A [Target]'s Send reads Delay (up to 7 days) and TTL, and refuses the
// rest, which only a [Publisher] can carry out ([Publisher.SendWith]; a
// [KeyedTarget] takes its key as an argument of SendKeyed instead).
type SendOptions struct {
	// Delay keeps the message from listeners for this long (rounded up to
	// whole seconds): up to 7 days for a Target, any for a Publisher.
	Delay time.Duration
	// At, if not zero, is when the message is due instead of Delay (see
	// [Publisher.SendAt]). A Publisher's only.
	At time.Time
	// TTL is how long the message lives (a Publisher's delayed one, from
	// its due time). Zero: 7 days, or [PublisherOptions.TTL]; negative:
	// for ever.
	TTL time.Duration
	// UniqueKey, if set, makes the send fail with [ErrDuplicate] if a
	// send with the same key was made through the same target within
	// UniqueFor, in any process (see [Publisher.SendWith]). A Publisher's
	// only.
	UniqueKey string
	UniqueFor time.Duration
	// Key, if set, is the message's key: the customer, order or account
	// it belongs to. It travels in the message text (a metadata entry,
	// [MetadataKey]) and a handler reads it as [MessageInfo.Key]; a
	// listener with [LimitOptions.PerKey] runs at most that many messages of
	// a key at once. A [KeyedTarget] such as a [ShardedQueue] also puts
	// every message of a key on one shard, so that they reach the same
	// listener instance (see [Publisher.SendKeyed]). At most [MaxKeyLength]
	// bytes of text XML can carry. A [SendMiddleware] sees and may change
	// it as [Outgoing.Key]. A Publisher's only.
	Key string
	// Group makes the message a child of a group (see [Group.Child]). A
	// Publisher's only; not for a batch.
	Group GroupChild
	// Track keeps the message's status in the payload store, read by
	// [PayloadStore.MessageStatus]. A Publisher's only; not for a batch.
	Track bool
}

// ForTarget returns a [*ConfigError] for what a [Target]'s Send cannot
// carry out (only a Publisher's options, a delay over 7 days): a Target of
// your own calls it first.
func (o *SendOptions) ForTarget() error {
	switch {
	case !o.At.IsZero():
		return &ConfigError{Field: "SendOptions.At", Reason: "only a Publisher sends at a time (Publisher.SendWith)"}
	case o.UniqueKey != "" || o.UniqueFor != 0:
		return &ConfigError{Field: "SendOptions.UniqueKey", Reason: "only a Publisher makes a send unique (Publisher.SendWith)"}
	case o.Key != "":
		return &ConfigError{Field: "SendOptions.Key", Reason: "a Target's Send takes no key (a KeyedTarget's SendKeyed, or Publisher.SendWith, does)"}
	case !o.Group.IsZero():
		return &ConfigError{Field: "SendOptions.Group", Reason: "only a Publisher sends a group's child (Publisher.SendWith)"}
	case o.Track:
		return &ConfigError{Field: "SendOptions.Track", Reason: "only a Publisher tracks a message (Publisher.SendWith)"}
	}
	return checkDelay(o.Delay)
}

// checkCount refuses a number of messages to receive or peek that the
// service would refuse; what names the argument ("Receive's max").
func checkCount(what string, n int) error {
	if n < 1 || n > MaxBatch {
		return &ConfigError{Field: what, Reason: fmt.Sprintf("%d: must be 1 to %d", n, MaxBatch)}
	}
	return nil
}

// checkVisibility refuses a visibility timeout the service would refuse:
// more than 7 days, negative, or zero unless zeroOK (a release may make a
// message visible at once; a receive must hide it).
func checkVisibility(what string, d time.Duration, zeroOK bool) error {
	if d < 0 || d > MaxVisibility || d == 0 && !zeroOK {
		limits := "more than 0 and at most 7 days"
		if zeroOK {
			limits = "between 0 and 7 days"
		}
		return &ConfigError{Field: what, Reason: fmt.Sprintf("%v: must be %s", d, limits)}
	}
	return nil
}

// checkReceive refuses a receive's arguments that the service would refuse.
func checkReceive(max int, visibility time.Duration) error {
	if err := checkCount("Receive's max", max); err != nil {
		return err
	}
	return checkVisibility("Receive's visibility", visibility, false)
}

// checkDelay refuses a [SendOptions.Delay] the service would refuse.
func checkDelay(delay time.Duration) error { return checkVisibility("SendOptions.Delay", delay, true) }

// Delivery is one received message as its [Source] returned it. The listener
// hands it from the dequeuer to one goroutine that settles it; while a batch
// runs, that goroutine's visibility renewals ([Source.SetVisibility], which may
// replace Receipt and NextVisibleAt) run beside item goroutines that read
// the other fields, so a Source must change no field but those two. (The
// listener itself sets DequeueCount to the real tries of a delayed message
// and Text to count its hops, before anything else reads them.)
type Delivery struct {
	ID            string
	Text          string // the message text exactly as stored
	DequeueCount  int64  // 1 on the first delivery
	InsertedAt    time.Time
	ExpiresAt     time.Time
	NextVisibleAt time.Time // when it reappears unless deleted or renewed
	// ReceivedAt is when it was received by the service's clock: the
	// receive answer's Date, to the second. Zero if the source cannot
	// tell; the listener then takes its own clock's time instead.
	ReceivedAt time.Time
	Queue      string // the queue it came from: for a [ShardedQueue], the shard's name

	// Receipt is what the [Source] that returned the delivery needs to delete
	// it or change its visibility later: for a [Queue], its pop receipt; for a
	// [ShardedQueue], the shard it came through as well. Only that source
	// reads it; everyone else passes the Delivery back as it is. A Source of
	// your own puts here whatever it needs (its own record of the message,
	// say), and may replace it in [Source.SetVisibility].
	Receipt any
}

// Limits of the Azure Queue Storage service.
const (
	// MaxBatch is the most messages one receive may return.
	MaxBatch = 32
	// MaxVisibility is the longest a message can be hidden.
	MaxVisibility = 7 * 24 * time.Hour
	// MaxMessageSize is the largest encoded message, in UTF-8 bytes, that a
	// [Publisher] puts on a queue as it is (larger ones are offloaded to a
	// blob): the service's 64 KiB less the 1 KiB kept for the header of a
	// poison envelope, so that every message sent can later be moved whole
	// into a poison queue.
	MaxMessageSize = serviceMessageLimit - poisonHeaderReserve
)

// serviceMessageLimit is the largest message text the service accepts, in
// UTF-8 bytes (XML escaping on the wire does not count).
const serviceMessageLimit = 64 * 1024

// Message is what a handler receives: the decoded body, and what the
// listener knows of the message it came in ([MessageInfo], whose fields
// read as the Message's own: m.ID, m.DequeueCount).
type Message[T any] struct {
	Body T
	MessageInfo
}

// MessageInfo describes a message a listener received: what a handler sees
// of it in its [Message], and a [Middleware] in its [Call]. Both embed it,
// so the two always describe a message alike. The listener's, not to be
// changed.
type MessageInfo struct {
	ID           string
	Queue        string // the queue the message came from: for a [ShardedQueue], the shard's name
	DequeueCount int64  // 1 on the first delivery; more means an earlier try failed or was cut short
	InsertedAt   time.Time

	// TimeInQueue is how long the message waited before this delivery:
	// from when it first became visible (its insertion, or, sent for
	// later, its due time) to the receive that brought it. Both ends are
	// the service's (its insertion time, and the receive answer's Date),
	// so no clock of a sender or a listener enters, and skew between them
	// does not matter; the service gives both to the second, so it is
	// whole seconds, and a wait under a second reads as 0 or 1 s. On a
	// redelivery it includes the earlier tries and their retry delays;
	// [State.TimeInQueue] counts first deliveries only. Zero if the source
	// does not give an insertion time.
	TimeInQueue time.Duration

	// BatchID names the batch the body is an item of (see
	// [Publisher.SendBatch]); empty for a message sent on its own, offloaded
	// or not. Item is the body's index in the batch, from 0. Together with
	// ID they identify an item across redeliveries.
	BatchID string
	Item    int

	// Occurrence is the occurrence of a schedule the message was sent for
	// by a [Scheduler]: its time, and whether it is late; nil for a message
	// sent otherwise.
	Occurrence *Occurrence

	// Key is the key the message was sent with ([SendOptions.Key]); empty
	// for none.
	Key string

	// Metadata is what the publisher carried with the message (for a batch
	// item, with its batch; see [Metadata]): nil when it carried none. The
	// items of a batch share one map: read it, do not change it.
	Metadata Metadata
}

// Handler processes one message. Its result decides the message's fate:
//   - nil: the message is deleted;
//   - an error: the message is released for another try after the
//     listener's retry delay, or poisoned once it has used its tries;
//   - [Permanent](err): the message is poisoned at once;
//   - a panic: recovered, and treated as an error.
//
// The context ends when the handler times out (cause [ErrHandlerTimeout]),
// when the listener can no longer keep the message hidden because another
// receiver may have it (cause [ErrOwnershipLost]), or at the end of a
// shutdown's drain (cause [ErrDrainTimeout]). Delivery is at least once: a
// message may be handled again after a crash or a lost delete, so handlers
// should be idempotent; [MessageInfo.DequeueCount] > 1 says a retry may be under way.
type Handler[T any] func(ctx context.Context, m *Message[T]) error

// Capabilities is what a [Source], [Target] or [Shard] can do beyond its
// interface: each field is the method of that name, bound to it, or nil if
// it has none. [CapabilitiesOf] reads them once, where a source enters (a
// [Listener], a [Publisher], a [ShardedQueue] reads them from what it is
// given); everything after asks the value, never the source.
//
// A source of your own offers a capability by having the method, with the
// signature of the field:
//
//   - Peek(ctx, max) looks at up to max visible messages without hiding
//     them: [ReadFront] and [OldestAge] read the front with it, a
//     [ShardedQueue] peeks at the shard with it, and the depth and age
//     endpoints, the dashboard and the OpenTelemetry age gauge refuse a
//     source without it.
//   - PoisonQueue() is the poison queue beside it (see [PoisonQueuer]): a
//     [Listener] on it, and a [ShardedQueue] whose shards all have one,
//     use it unless their options name another.
//   - PayloadStore() is its [PayloadStore] (see [PayloadStorer]): a
//     [Publisher] offloads to it and a [Listener] reads from it unless their
//     options name another. A wrapper passes on the store of what it wraps.
//   - Subscribe(wake) tells of work sent (see [WakeSource]): a [Listener] on
//     it wakes its idle dequeuers, a [ShardedQueue] passes its shards' on.
//   - SendKeyed(ctx, key, text, opts) keeps a key's messages together (see
//     [KeyedTarget]): [Publisher.SendKeyed] needs it.
//   - Create(ctx) creates the queue: [ListenerOptions.CreateQueue] needs it,
//     and [ShardedQueue.Create] creates the shards that have it.
//   - Exists(ctx) tells whether the queue exists: the command-line tool
//     tells a missing queue from an empty one with it.
//   - Degraded() says what of it is out while the rest works (see
//     [ShardedQueue.Degraded]): [Listener.Degraded] and readiness probes
//     show it.
//   - Host() is the host (and port) of its service, and Account() the
//     [Account] it lives in: endpoints and the dashboard name them, and
//     the shards of one account share its failures in a [ShardedQueue].
//   - Transactions() counts its billable requests (see [Transactions]): the
//     dashboard's cost page adds those of queues without an account.
//   - Shards() are the queues behind a sharded source: the endpoints, the
//     dashboard and the command-line tool show each.
//   - Settled(d) is told, once per delivery a [Listener] received, that
//     the listener has let go of it (deleted it, hidden it for a retry,
//     poisoned it, or left it to reappear): a [QueueSet] counts the
//     messages in hand of each of its queues with it.
//   - Pause, Resume and PauseState (see [Pauser]): a [Listener] on it
//     receives nothing while it is paused.
//   - ServiceTime() is the time on the service's clock (see
//     [Queue.ServiceTime]): a [Publisher] and a [Scheduler] decide what is
//     due by it rather than by this machine's clock.
//
// The sources of this package offer more, through methods of their own
// that a source outside it cannot have (a message's pop receipt when sent,
// the service's time learnt with a request, records kept in memory): a
// source of your own that lacks them works all the same, with what they
// add left out.
type Capabilities struct {
	Peek         func(ctx context.Context, max int) ([]*Delivery, error)
	PoisonQueue  func() Shard
	PayloadStore func() *PayloadStore
	Subscribe    func(wake func()) (cancel func())
	SendKeyed    func(ctx context.Context, key, text string, opts *SendOptions) (string, error)
	Create       func(ctx context.Context) error
	Exists       func(ctx context.Context) (bool, error)
	Degraded     func() error
	Host         func() string
	Account      func() *Account
	Transactions func() Transactions
	Shards       func() []Shard
	Settled      func(d *Delivery)
	ServiceTime  func() time.Time
	Pauser       Pauser

	// What only this package's sources can offer.

	// send sends and tells all of [sentMessage]: for a Target, its own
	// sendMessage, or else its Send, which tells the ID alone.
	send func(ctx context.Context, text string, opts *SendOptions) (sentMessage, error)
	// sendKeyed is send with a key: a [ShardedQueue]'s.
	sendKeyed func(ctx context.Context, key, text string, opts *SendOptions) (sentMessage, error)
	// sendBeside puts a poison envelope beside the queue its message came
	// from: a [ShardedQueue]'s poison queue's.
	sendBeside func(ctx context.Context, origin any, text string, opts *SendOptions) (string, error)
	// timeKnown reports whether ServiceTime comes from an answer yet: a
	// [*Queue]'s or a [ShardedQueue]'s; nil for a source that keeps its own
	// clock or cannot tell, which is taken to know it.
	timeKnown func() bool
	// learnTime learns the service's time with a request of its own.
	learnTime func(ctx context.Context) error
	// depthPaused reads the depth and the pause in one request: a [*Queue]'s.
	depthPaused func(ctx context.Context) (int, PauseState, error)
	// front reads the front of every queue behind it: a [ShardedQueue]'s.
	front func(ctx context.Context) (Front, error)
	// queueNamed is the [CancelTarget] called name, itself or behind it,
	// whose pop receipts can cancel a message sent to it; nil if none.
	queueNamed func(name string) CancelTarget
}

// CapabilitiesOf reads what v, a [Source], [Target] or [Shard], can do
// beyond its interface (see [Capabilities]). A nil v can do nothing more.
func CapabilitiesOf(v any) Capabilities {
	var c Capabilities
	if v, ok := v.(interface {
		Peek(ctx context.Context, max int) ([]*Delivery, error)
	}); ok {
		c.Peek = v.Peek
	}
	if v, ok := v.(PoisonQueuer); ok {
		c.PoisonQueue = v.PoisonQueue
	}
	if v, ok := v.(PayloadStorer); ok {
		c.PayloadStore = v.PayloadStore
	}
	if v, ok := v.(WakeSource); ok {
		c.Subscribe = v.Subscribe
	}
	if v, ok := v.(KeyedTarget); ok {
		c.SendKeyed = v.SendKeyed
	}
	if v, ok := v.(interface {
		Create(ctx context.Context) error
	}); ok {
		c.Create = v.Create
	}
	if v, ok := v.(interface {
		Exists(ctx context.Context) (bool, error)
	}); ok {
		c.Exists = v.Exists
	}
	if v, ok := v.(interface{ Degraded() error }); ok {
		c.Degraded = v.Degraded
	}
	if v, ok := v.(interface{ Host() string }); ok {
		c.Host = v.Host
	}
	if v, ok := v.(interface{ Account() *Account }); ok {
		c.Account = v.Account
	}
	if v, ok := v.(interface{ Transactions() Transactions }); ok {
		c.Transactions = v.Transactions
	}
	if v, ok := v.(interface{ Shards() []Shard }); ok {
		c.Shards = v.Shards
	}
	if v, ok := v.(interface{ Settled(d *Delivery) }); ok {
		c.Settled = v.Settled
	}
	if v, ok := v.(interface{ ServiceTime() time.Time }); ok {
		c.ServiceTime = v.ServiceTime
	}
	c.Pauser, _ = v.(Pauser)
	c.readOwn(v)
	return c
}

// readOwn reads the capabilities only this package's sources offer.
func (c *Capabilities) readOwn(v any) {
	if s, ok := v.(interface {
		sendMessage(ctx context.Context, text string, opts *SendOptions) (sentMessage, error)
	}); ok {
		c.send = s.sendMessage
	} else if t, ok := v.(Target); ok {
		cancel, _ := v.(CancelTarget)
		c.send = func(ctx context.Context, text string, opts *SendOptions) (sentMessage, error) {
			id, err := t.Send(ctx, text, opts)
			m := sentMessage{ID: id, Queue: t.Name()}
			if cancel != nil && err == nil {
				// A target that tells its send's pop receipt lets the
				// message be cancelled before it is first received.
				m.Receipt, m.Inserted, _ = cancel.SentReceipt(id)
			}
			return m, err
		}
	}
	if v, ok := v.(interface {
		sendKeyedMessage(ctx context.Context, key, text string, opts *SendOptions) (sentMessage, error)
	}); ok {
		c.sendKeyed = v.sendKeyedMessage
	}
	if v, ok := v.(interface {
		sendBeside(ctx context.Context, origin any, text string, opts *SendOptions) (string, error)
	}); ok {
		c.sendBeside = v.sendBeside
	}
	if v, ok := v.(interface{ serviceTimeKnown() bool }); ok {
		c.timeKnown = v.serviceTimeKnown
	}
	if v, ok := v.(interface {
		depthAndPause(ctx context.Context) (int, PauseState, error)
	}); ok {
		c.depthPaused = v.depthAndPause
	}
	if v, ok := v.(interface {
		learnTime(ctx context.Context) error
	}); ok {
		c.learnTime = v.learnTime
	}
	if v, ok := v.(interface {
		readFront(ctx context.Context) (Front, error)
	}); ok {
		c.front = v.readFront
	}
	if s, ok := v.(interface {
		queueNamed(name string) CancelTarget
	}); ok {
		c.queueNamed = s.queueNamed
	} else if t, ok := v.(CancelTarget); ok {
		c.queueNamed = func(name string) CancelTarget {
			if t.Name() == name {
				return t
			}
			return nil
		}
	}
}

// capabilitiesOfAll reads the capabilities of each of shards.
func capabilitiesOfAll(shards []Shard) []Capabilities {
	cs := make([]Capabilities, len(shards))
	for i, sh := range shards {
		cs[i] = CapabilitiesOf(sh)
	}
	return cs
}

// peeker returns what peeks, if c can.
func (c Capabilities) peeker() (peeker, bool) {
	if c.Peek == nil {
		return nil, false
	}
	return peekFunc(c.Peek), true
}

// peekFunc is a Peek method as a [peeker].
type peekFunc func(ctx context.Context, max int) ([]*Delivery, error)

// Peek calls f.
func (f peekFunc) Peek(ctx context.Context, max int) ([]*Delivery, error) { return f(ctx, max) }

// account is the account c's source lives in; nil if it cannot tell.
func (c Capabilities) account() *Account {
	if c.Account == nil {
		return nil
	}
	return c.Account()
}

// payloadStore is the store of c's source; nil if it has none.
func (c Capabilities) payloadStore() *PayloadStore {
	if c.PayloadStore == nil {
		return nil
	}
	return c.PayloadStore()
}

// poisonQueue is the poison queue beside c's source; nil if it has none.
func (c Capabilities) poisonQueue() Shard {
	if c.PoisonQueue == nil {
		return nil
	}
	return c.PoisonQueue()
}

// Every decision about time that crosses machines (is a delayed message
// due, when does a record expire, which occurrence of a schedule is this)
// is taken on the storage service's clock. Each account keeps one,
// corrected by the Date of every answer its clients get, errors included
// (svcclock.Policy); a decision that needs it before any answer has come
// learns it first with one request (learnServiceTime), rather than take
// this machine's clock for the service's.

// serviceTimeKnown reports whether c's source knows the service's time from
// an answer: a [*Queue] that has had one, a [ShardedQueue] one of whose
// shards has; a source of its own clock (a memqueue.Queue), or one that
// cannot tell, is taken to know it.
func (c Capabilities) serviceTimeKnown() bool { return c.timeKnown == nil || c.timeKnown() }

// serviceTime is the service's time by the first of cs that knows it; by
// the first that keeps one if none knows it yet; and the local clock's if
// none keeps one.
func serviceTime(cs ...Capabilities) time.Time {
	var first func() time.Time
	for _, c := range cs {
		if c.ServiceTime == nil {
			continue
		}
		if c.serviceTimeKnown() {
			return c.ServiceTime()
		}
		if first == nil {
			first = c.ServiceTime
		}
	}
	if first != nil {
		return first()
	}
	return time.Now()
}

// learnServiceTime makes sure c's source knows the service's time before a
// decision that needs it, with one request if no answer has told it yet. A
// source of its own clock, or one that cannot learn it, is left as it is.
func (c Capabilities) learnServiceTime(ctx context.Context) error {
	if c.learnTime != nil && !c.serviceTimeKnown() {
		return c.learnTime(ctx)
	}
	return nil
}
