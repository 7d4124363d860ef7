package azdispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// Sent is a message a [Publisher] sent: what every send returns
// ([Publisher.Send], [Publisher.SendKeyed], [Publisher.SendWith],
// [Publisher.SendAfter], [Publisher.SendAt] and [Publisher.SendBatch]).
type Sent struct {
	// ID is the message's ID: for a batch, its pointer message's.
	ID string
	// Due is when a listener may first handle it, on the service's clock,
	// to the second: the time [Publisher.SendAt] named (even one past), or
	// the insertion time plus the delay.
	Due time.Time
	// Token is what [Publisher.Cancel] needs to cancel the message: safe to
	// store (in a database, say) and to use from another process. It holds
	// no secret (a cancel still needs the queue's credentials). Empty if
	// the target cannot tell what a cancel needs (a [Target] of your own
	// that is not a [CancelTarget]).
	Token string

	// BatchID, Items and BatchBytes describe a batch ([Publisher.SendBatch]);
	// they are zero for a single message. BatchID is the payload blob's
	// name, each item's [MessageInfo.BatchID]; Items is how many items it
	// holds; BatchBytes is what the blob stores (gzip).
	BatchID    string
	Items      int
	BatchBytes int64
}

// SendWith is [Publisher.Send] with per-send options:
//   - [SendOptions.Delay] or [SendOptions.At]: handled no sooner than then,
//     by the service's clock, however far ahead (see [Publisher.SendAfter]);
//   - [SendOptions.TTL]: the message's life, instead of [PublisherOptions.TTL];
//   - [SendOptions.Key]: every message of the key on one shard of a
//     [KeyedTarget] (see [Publisher.SendKeyed]);
//   - [SendOptions.UniqueKey]: a second send with the same key within
//     [SendOptions.UniqueFor] fails with [ErrDuplicate], across processes
//     and machines. The key is held by a blob in the payload store (one
//     conditional write, If-None-Match: *), released if the send fails, and
//     taken over once its window has passed on the service's clock;
//     [Sweep] removes expired keys. A send whose answer was lost after the
//     service took the message releases its key too: a retry may then send
//     it twice, as with any send (delivery is at least once).
//
// It returns what [Publisher.Cancel] needs.
func (p *Publisher[T]) SendWith(ctx context.Context, body T, opts *SendOptions) (Sent, error) {
	o, r, err := p.routeFor(ctx, opts)
	if err != nil {
		return Sent{}, err
	}
	var m sentMessage
	err = p.unique(ctx, o, func() error {
		m, r, err = p.publish(ctx, body, r)
		return err
	})
	if err != nil {
		return Sent{}, err
	}
	return p.sent(m, r), nil
}

// SendAfter is [Publisher.SendWith] with [SendOptions.Delay]: the message
// is handled no sooner than delay from now (rounded up to whole seconds),
// counted on the service's clock.
//
// A delay up to [MaxVisibility] (7 days) is the service's own: the message is
// sent hidden for it, in one send, its text what [Publisher.Send] would
// send after a short line that says when it is due (a marker of the
// format and its version, then a JSON object), so that a listener counts its time in
// queue from then ([MessageInfo.TimeInQueue]); nothing else reads it. A
// longer one, of any length, is recorded in the message's text (a line
// before the body, relative to the service's insertion time), and the
// message is sent hidden for 7 days; a listener that receives it before it
// is due hides it again, for what remains or 7 days, without running the
// handler: one Update Message a week while it waits, riding on a receive the
// listener makes anyway, and nothing else (no table, no poller). Those hops
// are not tries: they never count towards [ListenerOptions.MaxDequeueCount],
// and the handler's [MessageInfo.DequeueCount] counts only real deliveries.
// Listeners must be of a version that reads due lines to read a delayed
// message (an earlier one poisons it as undecodable): upgrade listeners
// first.
//
// A delayed message lives its TTL past its due time (see
// [PublisherOptions.TTL]), and so does its payload blob, if offloaded.
func (p *Publisher[T]) SendAfter(ctx context.Context, body T, delay time.Duration) (Sent, error) {
	return p.SendWith(ctx, body, &SendOptions{Delay: delay})
}

// SendAt is [Publisher.SendWith] with [SendOptions.At]: the message is
// handled no sooner than at (rounded up to a whole second) by the service's
// clock, however far ahead (to the end of the year 9999); a time already
// past sends it visible at once. The publisher hides it for the time that
// remains by the service's clock (see [Queue.ServiceTime]), never by its
// own: if no answer of the target's account has told it the service's
// time yet, it asks first (one Get Queue Properties, whose answer tells it
// even when it refuses). Through a [ShardedQueue] the wait is counted on
// the clock of the first shard that tells it: the accounts of its shards
// are taken to share one clock, as the service's accounts do (emulators
// set to different clocks do not). Beyond 7 days the time is recorded in
// the message's text, as for [Publisher.SendAfter], whose notes on hops,
// TTL and upgrades apply; a message due more than 68 years ahead, the
// longest TTL the service counts, never expires. The message lives its
// TTL from its send, or from its due time if that is later.
func (p *Publisher[T]) SendAt(ctx context.Context, body T, at time.Time) (Sent, error) {
	if at.IsZero() {
		return Sent{}, &ConfigError{Field: "SendAt's time", Reason: "zero"}
	}
	return p.SendWith(ctx, body, &SendOptions{At: at})
}

// routeFor checks a send's options (nil: the defaults) before anything
// is written (a large body's blob, a unique key), and says how the message
// goes. A send at a time learns the service's first, if nothing has told
// it yet: its wait is counted on that clock.
func (p *Publisher[T]) routeFor(ctx context.Context, opts *SendOptions) (SendOptions, route, error) {
	var o SendOptions
	if opts != nil {
		o = *opts
	}
	if err := p.checkSendOptions(o); err != nil {
		return o, route{}, err
	}
	if !o.At.IsZero() {
		if err := p.caps.learnServiceTime(ctx); err != nil {
			return o, route{}, wrapf(err, "send at %s", o.At.UTC().Format(time.RFC3339))
		}
	}
	return o, p.routeOf(o), nil
}

// checkSendOptions refuses a send's options that make no sense, before
// any request.
func (p *Publisher[T]) checkSendOptions(o SendOptions) error {
	switch {
	case o.Delay < 0 || o.Delay > wire.MaxAfter:
		return &ConfigError{Field: "SendOptions.Delay", Reason: fmt.Sprintf("%v: must be between 0 and a century (SendOptions.At takes any time to the end of 9999)", o.Delay)}
	case !o.At.IsZero() && !wire.InRange(o.At.Add(time.Second-1)):
		return &ConfigError{Field: "SendOptions.At", Reason: fmt.Sprintf("%v: must be within the years 1970 to 9999", o.At)}
	case o.Delay > 0 && !o.At.IsZero():
		return &ConfigError{Field: "SendOptions.At", Reason: "set with Delay: give one"}
	case o.UniqueKey == "" && o.UniqueFor != 0:
		return &ConfigError{Field: "SendOptions.UniqueFor", Reason: "set without UniqueKey"}
	case o.UniqueKey != "" && o.UniqueFor <= 0:
		return &ConfigError{Field: "SendOptions.UniqueFor", Reason: fmt.Sprintf("%v: a unique key needs a window", o.UniqueFor)}
	case o.UniqueKey != "" && p.store == nil:
		return wrapf(p.noStore(), "a unique send keeps its key in the payload store")
	}
	return checkKey("SendOptions.Key", o.Key)
}

// routeOf says how a message sent with o (checked) goes: for SendAt's
// time, hidden for what remains of the wait by the service's clock.
func (p *Publisher[T]) routeOf(o SendOptions) route {
	r := route{delay: upToSecond(o.Delay), key: o.Key, ttl: o.TTL, ownTTL: o.TTL != 0}
	if o.At.IsZero() {
		return r
	}
	at := o.At.UTC()
	if t := at.Truncate(time.Second); !t.Equal(at) {
		at = t.Add(time.Second)
	}
	r.at = at
	if wait := at.Sub(serviceTime(p.caps)); wait > 0 {
		// The due line carries the time itself: the delay only sets the
		// first hop and the TTL, and a century says as much of those as
		// any longer wait (which a Duration may not even hold).
		r.delay = upToSecond(min(wait, wire.MaxAfter))
		// A target that cannot tell the service's time (one of your
		// own): the line lets listeners decide on the service's.
		r.line = !p.caps.serviceTimeKnown()
	}
	return r
}

// upToSecond rounds d up to whole seconds, the service's unit, so that a
// message is never due earlier than asked.
func upToSecond(d time.Duration) time.Duration {
	if t := d.Truncate(time.Second); t != d {
		return t + time.Second
	}
	return d
}

// sent describes a message sent as r says to a caller.
func (p *Publisher[T]) sent(m sentMessage, r route) Sent {
	inserted := m.Inserted
	if inserted.IsZero() { // a Target of your own: the best guess
		inserted = serviceTime(p.caps).Truncate(time.Second)
	}
	s := Sent{ID: m.ID, Due: r.at}
	if s.Due.IsZero() {
		s.Due = inserted.Add(r.delay).UTC()
	}
	if m.Receipt != "" {
		s.Token = cancelToken{
			Queue: m.Queue, ID: m.ID, Receipt: m.Receipt, Due: s.Due.Unix(),
			Hops: p.hops(r), Blob: m.Blob, Expires: p.expires(r, inserted),
		}.encode()
	}
	return s
}
