package azdispatch

import (
	"context"
	"time"
)

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
	ServiceTime  func() time.Time

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
	if v, ok := v.(interface{ ServiceTime() time.Time }); ok {
		c.ServiceTime = v.ServiceTime
	}
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
