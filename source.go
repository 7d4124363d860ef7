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
	// Name identifies the target in logs and errors.
	Name() string
	// Send puts text on the queue and returns the new message's ID.
	Send(ctx context.Context, text string, opts *SendOptions) (string, error)
}

// KeyedTarget is a [Target] that can keep all messages of a key together,
// such as a [ShardedQueue], which puts them on one shard.
type KeyedTarget interface {
	Target
	// SendKeyed puts text where every message with this key goes.
	SendKeyed(ctx context.Context, key, text string, opts *SendOptions) (string, error)
}

// PoisonQueuer is a [Shard] with a poison queue of its own beside it, such as
// a [*Queue] of an [Account], a [*ShardedQueue] or a memqueue.Queue. A
// [Listener] on it, and a [ShardedQueue] over shards that all have one, use
// it by default (see [ListenerOptions.PoisonQueue]).
type PoisonQueuer interface {
	// PoisonQueue returns the poison queue, or nil (a nil interface) if
	// there is none.
	PoisonQueue() Shard
}

// PayloadStorer is a [Source] or [Target] with a [PayloadStore] of its own, such
// as a [*Queue] of an [Account], a [ShardedQueue] or a memqueue.Queue: a [Publisher] offloads to it,
// and a [Listener] reads from it, unless their options name another (see
// [PublisherOptions.Payloads] and [PayloadOptions.Store]). A Source of your
// own that wraps one passes it on by implementing PayloadStorer too.
type PayloadStorer interface {
	// PayloadStore returns the store, or nil if there is none.
	PayloadStore() *PayloadStore
}

// WakeSource tells its subscribers that work was sent. A [*Queue] is one: it
// calls them after every successful [Queue.Send] through it in this process. An
// [endpoint.WakeHandler] is one for wake-ups from other processes.
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
	// Delay keeps the message from listeners for this long after it is
	// sent (rounded up to whole seconds, the service's unit): up to 7 days
	// for a Target, any length for a Publisher (see [Publisher.SendAfter]).
	Delay time.Duration
	// At, if not zero, is when the message is due instead of Delay (see
	// [Publisher.SendAt]). A Publisher's only.
	At time.Time
	// TTL is how long the message lives: for a [Publisher], a delayed one
	// from its due time. Zero means the service default of 7 days (a
	// Publisher's own [PublisherOptions.TTL]); a negative value means it
	// never expires.
	TTL time.Duration
	// UniqueKey, if set, makes the send fail with [ErrDuplicate] if a
	// send with the same key was made through the same target within
	// UniqueFor, in any process (see [Publisher.SendWith]). A Publisher's
	// only.
	UniqueKey string
	UniqueFor time.Duration
	// Key, if set, keeps every message sent with it together: a
	// [KeyedTarget] such as a [ShardedQueue] puts them all on one shard,
	// so that they reach the same listener instance (see
	// [Publisher.SendKeyed]). A send with a key to a target that is not a
	// KeyedTarget fails with a [*ConfigError] rather than ignore it, since
	// a sender that sets one relies on it. A [SendMiddleware] sees and may
	// change it as [Outgoing.Key]. A Publisher's only.
	Key string
}

// checkTargetOptions refuses what a Target's Send cannot carry out.
func checkTargetOptions(o *SendOptions) error {
	switch {
	case !o.At.IsZero():
		return &ConfigError{Field: "SendOptions.At", Reason: "only a Publisher sends at a time (Publisher.SendWith)"}
	case o.UniqueKey != "" || o.UniqueFor != 0:
		return &ConfigError{Field: "SendOptions.UniqueKey", Reason: "only a Publisher makes a send unique (Publisher.SendWith)"}
	case o.Key != "":
		return &ConfigError{Field: "SendOptions.Key", Reason: "a Target's Send takes no key (a KeyedTarget's SendKeyed, or Publisher.SendWith, does)"}
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
