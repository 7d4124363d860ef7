package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/azdispatch/azdispatch/internal/keyorder"
	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/route"
	"github.com/azdispatch/azdispatch/internal/wire"
	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// PublisherOptions configures a [Publisher]. Nil, or a zero field, means the
// documented default.
type PublisherOptions struct {
	// Codec encodes bodies. Defaults to [JSON](); listeners must use the same.
	Codec Codec
	// TTL is how long each message lives: a delayed one, from its due
	// time. Defaults to the service's 7 days; negative means messages
	// never expire.
	TTL time.Duration
	// OnSent, if set, is called after every successful send of a message
	// visible at once (each [Publisher.Send], [Publisher.SendKeyed] and
	// [Publisher.SendBatch], offloaded or not; not [Publisher.SendAfter] with a
	// delay), with its ID, to tell listeners in other processes that work is
	// there (an endpoint.Notifier's Notify, or any transport). It must not
	// block. Listeners in this process on the same [*Queue] are woken without
	// it.
	OnSent func(ctx context.Context, id string)
	// Payloads is where batches and messages too large for the queue are
	// offloaded. Defaults to the target's own store, if it is a
	// [PayloadStorer]: for a [*Queue], its account's (container
	// [DefaultPayloadContainer]); for a [ShardedQueue], the one its options name
	// or its first shard's. Without a store (a queue opened by SAS URL, a
	// [Target] of your own), [Publisher.SendBatch] and large messages fail with
	// [ErrNoBlobService].
	Payloads *PayloadStore
	// PayloadLimits are refused before any request, so that nothing is sent
	// that a listener with the same limits would poison. Zero fields mean
	// the defaults, which are also the listener's.
	PayloadLimits PayloadLimits
	// Middleware wraps every send, outermost first (see [SendMiddleware]).
	// Defaults to none.
	Middleware []SendMiddleware
	// PlainDelays sends a message delayed by up to 7 days with the codec's
	// text alone, byte for byte, as a queue shared with readers other
	// than this package's listeners needs (the Azure Functions queue
	// trigger). By default such a message carries a line before its text
	// that says when it is due, so that a listener counts its time in
	// queue ([MessageInfo.TimeInQueue]) from then; with PlainDelays it counts
	// from the send, delay included. A message due beyond 7 days, one sent
	// with [Publisher.SendAt] before the queue has answered, and a
	// [Scheduler]'s carry their line whatever this says.
	PlainDelays bool
}

// Publisher sends typed messages to a [Target]. It is safe for concurrent use.
//
// Every send takes one path: the body is encoded; a text too large for a
// queue message (over [MaxMessageSize]), or one that would pass for a pointer
// to an offloaded payload, is written to a blob in the payload store and a
// small pointer is sent in its place (a claim check); the text goes out as
// a plain, delayed or keyed send; and [PublisherOptions.OnSent] hears of every
// message visible at once.
type Publisher[T any] struct {
	target Target
	caps   Capabilities // what target can do, read once
	codec  Codec
	// policy is what the options say of every message's route: its TTL,
	// whether a delay within the service's own carries a due line, and the
	// longest the service hides a message (shorter in this package's
	// tests, which cannot wait a week).
	policy route.Policy
	onSent func(ctx context.Context, id string)
	store  *PayloadStore // nil: nothing can be offloaded
	limits payload.Limits
	// mw is the send middleware, outermost first; sendOut, the end of its
	// chain, is made once rather than per send.
	mw      []SendMiddleware
	sendOut func(ctx context.Context, s *Outgoing) error
	// order stamps keyed messages with their place in their key's order.
	order *keyorder.Sequencer
}

// NewPublisher returns a publisher of T values to target.
func NewPublisher[T any](target Target, opts *PublisherOptions) (*Publisher[T], error) {
	if target == nil {
		return nil, &ConfigError{Field: "target", Reason: "nil"}
	}
	caps := CapabilitiesOf(target)
	var o PublisherOptions
	if opts != nil {
		o = *opts
	}
	if o.Codec == nil {
		o.Codec = JSON()
	}
	if err := checkCodecType[T](o.Codec); err != nil {
		return nil, &ConfigError{Field: "PublisherOptions.Codec", Reason: err.Error()}
	}
	limits, err := o.PayloadLimits.withDefaults("PublisherOptions.PayloadLimits")
	if err != nil {
		return nil, err
	}
	if o.Payloads == nil {
		o.Payloads = caps.payloadStore()
	}
	for i, m := range o.Middleware {
		if m == nil {
			return nil, &ConfigError{Field: "PublisherOptions.Middleware", Reason: fmt.Sprintf("[%d] is nil", i)}
		}
	}
	p := &Publisher[T]{target: target, order: keyorder.NewSequencer(), caps: caps, codec: o.Codec, onSent: o.OnSent,
		store: o.Payloads, limits: payload.Limits(limits), policy: route.Policy{Hop: MaxVisibility, TTL: o.TTL, Plain: o.PlainDelays}}
	if len(o.Middleware) > 0 {
		p.mw, p.sendOut = slices.Clone(o.Middleware), p.sendOutgoing
	}
	return p, nil
}

// Send encodes body and puts it on the queue, visible at once. A body that
// encodes to more than [MaxMessageSize] bytes (base64 and JSON escapes count;
// the XML escaping of the request does not, as the service counts the text it
// stores) is offloaded to the payload store and a pointer is sent in its
// place (a claim check): the listener resolves it before decoding, so its
// handler cannot tell. Without a payload store such a body fails with a
// [*MessageTooLargeError], before any request.
//
// It is [Publisher.SendWith] with no options, and returns the same [Sent].
func (p *Publisher[T]) Send(ctx context.Context, body T) (Sent, error) {
	return p.SendWith(ctx, body, nil)
}

// SendKeyed is [Publisher.SendWith] with [SendOptions.Key]: the handler
// reads the key as [MessageInfo.Key], a listener with [LimitOptions.PerKey]
// runs the key's messages that many at a time, and on a [KeyedTarget] every
// message of the key lands on the same shard and so reaches the same
// listener instance (see [ShardedQueue.SendKeyed] and
// [ShardedQueue.Subset]). An empty key, or one longer than [MaxKeyLength],
// fails with a [*ConfigError].
func (p *Publisher[T]) SendKeyed(ctx context.Context, key string, body T) (Sent, error) {
	if key == "" {
		// Without a key it would go round robin: an unset key would
		// quietly lose the key's shard.
		return Sent{}, &ConfigError{Field: "SendKeyed's key", Reason: "empty"}
	}
	return p.SendWith(ctx, body, &SendOptions{Key: key})
}

// publish is the path of every single message: through the middleware, if
// any, to send.
// It returns the route taken: a middleware may have changed the delay.
func (p *Publisher[T]) publish(ctx context.Context, body T, r route.Route) (sentMessage, route.Route, error) {
	if p.mw == nil {
		m, _, err := p.send(ctx, body, r, nil)
		return m, r, err
	}
	s := p.outgoing(&body, r)
	if err := s.Next(ctx); err != nil {
		return sentMessage{}, r, err
	}
	return s.sent, s.route, nil
}

// send encodes body, offloads it when the text cannot go on the queue as
// it is, and delivers it with its due line and meta's line before it. It
// returns what the target said of the message and the text sent.
func (p *Publisher[T]) send(ctx context.Context, body T, r route.Route, meta Metadata) (m sentMessage, sent string, err error) {
	text, err := p.codec.Encode(body)
	if err != nil {
		return m, "", wrapf(err, "encode")
	}
	msg := wire.Text{Due: p.policy.DueLine(r), Body: text}
	meta, stamp := p.withEntries(meta, r)
	if msg.Meta, err = wire.NewMeta(meta); err != nil {
		return m, "", err
	}
	head := len(msg.Head())
	limit := MaxMessageSize
	if r.Key != "" {
		// Room for the line a listener adds when it snoozes the message
		// while its key is at its limit, so that it need not count a try.
		limit -= snoozeRoom
	}
	if !p.policy.Hops(r) && head+len(text) > limit && len(msg.Meta.Line())+len(text) <= limit {
		// A line the service's own delay needs only for the time in
		// queue is not worth a blob: without it the text fits.
		msg.Due, head = nil, len(msg.Meta.Line())
	}
	// The target checks the text itself; the publisher's limit is tighter.
	// A body that looks like a pointer or a line of ours is offloaded
	// too, so that a listener never mistakes it for one.
	if size := head + len(text); size > limit || wire.Marked(text) {
		ptr, err := p.claimCheck(ctx, text, size, r)
		if err != nil {
			return m, "", err
		}
		msg.Pointer, msg.Body = ptr, ""
	}
	sent = msg.Render()
	m, err = p.deliver(ctx, sent, r)
	p.keySent(r.Key, stamp, err)
	if msg.Pointer != nil {
		m.Blob = msg.Pointer.Blob
	}
	return m, sent, err
}

// outgoing describes a send to the middleware; body is a *T or a *[]T.
func (p *Publisher[T]) outgoing(body any, r route.Route) *Outgoing {
	return &Outgoing{Queue: p.target.Name(), Body: body, Key: r.Key, Delay: r.Delay,
		route: r, chain: p.mw, send: p.sendOut}
}

// sendOutgoing is the end of every send middleware chain: the send.
func (p *Publisher[T]) sendOutgoing(ctx context.Context, s *Outgoing) error {
	if s.isBatch {
		items, ok := s.Body.(*[]T)
		if !ok {
			return fmt.Errorf("azdispatch: a send middleware replaced Outgoing.Body (a %T now)", s.Body)
		}
		if err := s.takeRoute(); err != nil {
			return err
		}
		if err := checkKey("Outgoing.Key", s.route.Key); err != nil {
			return err
		}
		m, ptr, size, err := p.sendBatch(ctx, *items, s.Metadata, s.route)
		if err != nil {
			return err
		}
		s.sent, s.batch, s.ID, s.Size, s.Offloaded, s.SentTo = m, ptr, m.ID, size, true, m.Queue
		return nil
	}
	body, ok := s.Body.(*T)
	if !ok {
		return fmt.Errorf("azdispatch: a send middleware replaced Outgoing.Body (a %T now)", s.Body)
	}
	if err := s.takeRoute(); err != nil {
		return err
	}
	if err := checkKey("Outgoing.Key", s.route.Key); err != nil {
		return err
	}
	m, text, err := p.send(ctx, *body, s.route, s.Metadata)
	if err != nil {
		return err
	}
	s.ID, s.Size, s.Offloaded, s.SentTo, s.sent = m.ID, len(text), m.Blob != "", m.Queue, m
	return nil
}

// deliver sends text as r says, and tells OnSent of a message visible at once.
func (p *Publisher[T]) deliver(ctx context.Context, text string, r route.Route) (sentMessage, error) {
	opts := &SendOptions{Delay: min(r.Delay, p.policy.Hop), TTL: p.policy.TTLOf(r)}
	var m sentMessage
	var err error
	switch {
	case r.Key != "" && p.caps.sendKeyed != nil:
		m, err = p.caps.sendKeyed(ctx, r.Key, text, opts)
	case r.Key != "" && p.caps.SendKeyed != nil:
		m.ID, err = p.caps.SendKeyed(ctx, r.Key, text, opts)
	default:
		m, err = p.caps.send(ctx, text, opts)
	}
	if err != nil {
		return sentMessage{}, err
	}
	if r.Delay == 0 && p.onSent != nil {
		p.onSent(ctx, m.ID)
	}
	return m, nil
}

// checkKey refuses a key that cannot travel in a message's text: too long,
// or text XML cannot carry. field names the option that set it.
func checkKey(field, key string) error {
	switch {
	case len(key) > MaxKeyLength:
		return &ConfigError{Field: field, Reason: fmt.Sprintf("%d bytes, more than MaxKeyLength (%d)", len(key), MaxKeyLength)}
	case xmltext.Check(key) != nil:
		return &ConfigError{Field: field, Reason: fmt.Sprintf("%q holds text a queue message cannot carry", key)}
	}
	return nil
}

// withEntries is meta with the entries the library writes for a message
// sent as r says: its key as [MetadataKey] and its place in the key's order
// as [MetadataOrder], and its group's reference, if it has them. The same
// entries found in meta are dropped: a message carries the key and group
// it was sent with, never those a handler forwarded in metadata it
// received (nor a group's outcome or once-mark, which only a group's
// continuation carries). Once the send is over, keySent records how it
// went.
func (p *Publisher[T]) withEntries(meta Metadata, r route.Route) (Metadata, keyorder.Stamp) {
	reserved := false
	for _, k := range libraryEntries {
		if _, ok := meta[k]; ok {
			reserved = true
		}
	}
	if r.Key == "" && r.Group == "" && r.Track == "" && !reserved {
		return meta, keyorder.Stamp{}
	}
	out := make(Metadata, len(meta)+3)
	for k, v := range meta {
		if !slices.Contains(libraryEntries, k) {
			out[k] = v
		}
	}
	if r.Group != "" {
		out[wire.GroupEntry] = r.Group
	}
	if r.Track != "" {
		out[wire.TrackEntry] = r.Track
	}
	if r.Key == "" {
		return out, keyorder.Stamp{}
	}
	stamp := p.order.Next(r.Key)
	out[MetadataKey], out[MetadataOrder] = r.Key, stamp.String()
	return out, stamp
}

// libraryEntries are the metadata entries a publisher writes itself, and
// drops from the metadata it is given.
var libraryEntries = []string{MetadataKey, MetadataOrder, wire.GroupEntry, wire.GroupDoneEntry, wire.OnceEntry, wire.TrackEntry}

// keySent records a keyed send that succeeded: the key's later messages
// follow it. One that failed is followed by none, as it may not have been
// sent.
func (p *Publisher[T]) keySent(key string, stamp keyorder.Stamp, err error) {
	if key != "" && err == nil {
		p.order.Sent(key, stamp)
	}
}

// noStore is the error of a publisher with no payload store.
func (p *Publisher[T]) noStore() error {
	return fmt.Errorf("%w: %s has no payload store (see PayloadStorer); set PublisherOptions.Payloads", ErrNoBlobService, p.target.Name())
}

// claimCheck writes one encoded message that cannot go on the queue as it is
// to a payload blob, and returns the pointer to send in its place. The
// listener resolves the pointer before decoding, so the handler sees the
// same body either way.
//
// size is what the message would take on the queue, metadata included.
func (p *Publisher[T]) claimCheck(ctx context.Context, text string, size int, r route.Route) (*wire.Pointer, error) {
	if p.store == nil {
		var why error = &MessageTooLargeError{Size: size, Limit: MaxMessageSize}
		switch {
		case wire.Marked(text):
			why = fmt.Errorf("azdispatch: message text starts with a reserved prefix (%q or %q)", wire.PointerMagic, wire.MetaMagic)
		case size <= MaxMessageSize:
			why = &MessageTooLargeError{Size: size + snoozeRoom, Limit: MaxMessageSize} // a keyed message keeps room to be snoozed
		}
		return nil, fmt.Errorf("%w; offloading it needs a payload store: %w", why, p.noStore())
	}
	w := payload.NewWriter(p.limits)
	if err := w.Add(text); err != nil {
		return nil, limitOption(err, "PublisherOptions")
	}
	return p.offload(ctx, payload.KindSingle, w, r)
}

// limitOption adds to an error of a payload over one of its limits which
// option sets that limit (options names the publisher's or the
// listener's), so that the one to raise is named; other errors are
// returned as they are.
func limitOption(err error, options string) error {
	var le *payload.LimitError
	if !errors.As(err, &le) {
		return err
	}
	if options == "PublisherOptions" {
		return fmt.Errorf("%w: to send it, raise PublisherOptions.PayloadLimits.%s, and ListenerOptions.Payloads.Limits.%s of the listeners with it", err, le.Limit, le.Limit)
	}
	return fmt.Errorf("%w: set by ListenerOptions.Payloads.Limits.%s", err, le.Limit)
}

// offload writes a payload built in w, for a message sent as r says, to a
// blob and returns its pointer. The blob expires when the message does.
// The blob is written before the pointer is sent: a pointer must never name
// a blob that does not exist yet. If the send then fails, the blob is left
// for [Sweep] rather than deleted, because a send that failed on the client
// may have succeeded at the service, and deleting would leave a dangling
// pointer, which is a lost message; a leftover blob is only waste.
func (p *Publisher[T]) offload(ctx context.Context, kind string, w *payload.Writer, r route.Route) (*wire.Pointer, error) {
	data, err := w.Finish()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	meta := payload.Meta{Kind: kind, Queue: p.target.Name(), Created: now, Items: w.Items(), Expires: p.policy.BlobExpires(r, now)}
	return p.store.put(ctx, meta, data)
}

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
	// StatusToken is what [PayloadStore.MessageStatus] reads the message's
	// status by, for a send with [SendOptions.Track]; empty otherwise.
	// Unlike Token it gives no power over the message: it can be shown to
	// whoever may see its progress (see endpoint.NewStatusHandler).
	StatusToken string

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
	if o.Track {
		if r.Track, err = p.track(ctx); err != nil {
			return Sent{}, err
		}
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
func (p *Publisher[T]) routeFor(ctx context.Context, opts *SendOptions) (SendOptions, route.Route, error) {
	var o SendOptions
	if opts != nil {
		o = *opts
	}
	if err := p.checkSendOptions(o); err != nil {
		return o, route.Route{}, err
	}
	if !o.At.IsZero() {
		if err := p.caps.learnServiceTime(ctx); err != nil {
			return o, route.Route{}, wrapf(err, "send at %s", o.At.UTC().Format(time.RFC3339))
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
	case o.Track && p.store == nil:
		return wrapf(p.noStore(), "a tracked message's status is kept in the payload store")
	}
	return checkKey("SendOptions.Key", o.Key)
}

// routeOf says how a message sent with o (checked) goes: for SendAt's
// time, hidden for what remains of the wait by the service's clock.
func (p *Publisher[T]) routeOf(o SendOptions) route.Route {
	r := route.For(o.Delay, o.At, o.Key, o.TTL, serviceTime(p.caps), p.caps.serviceTimeKnown())
	r.Group = o.Group.ref
	return r
}

// sent describes a message sent as r says to a caller.
func (p *Publisher[T]) sent(m sentMessage, r route.Route) Sent {
	inserted := m.Inserted
	if inserted.IsZero() { // a Target of your own: the best guess
		inserted = serviceTime(p.caps).Truncate(time.Second)
	}
	s := Sent{ID: m.ID, Due: r.At, StatusToken: r.Track}
	if s.Due.IsZero() {
		s.Due = inserted.Add(r.Delay).UTC()
	}
	if m.Receipt != "" {
		s.Token = cancelToken{
			Queue: m.Queue, ID: m.ID, Receipt: m.Receipt, Due: s.Due.Unix(),
			Hops: p.policy.Hops(r), Blob: m.Blob, Expires: p.policy.Expires(r, inserted), Track: r.Track,
		}.encode()
	}
	return s
}
