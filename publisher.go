package azdispatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/azdispatch/azdispatch/internal/keyorder"
	"github.com/azdispatch/azdispatch/internal/payload"
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
	ttl    time.Duration
	plain  bool // PlainDelays
	onSent func(ctx context.Context, id string)
	store  *PayloadStore // nil: nothing can be offloaded
	limits payload.Limits
	// mw is the send middleware, outermost first; sendOut, the end of its
	// chain, is made once rather than per send.
	mw      []SendMiddleware
	sendOut func(ctx context.Context, s *Outgoing) error
	// hop is the longest the service hides a message: MaxVisibility, or
	// less in this package's tests, which cannot wait a week.
	hop time.Duration
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
	p := &Publisher[T]{target: target, order: keyorder.NewSequencer(), caps: caps, codec: o.Codec, ttl: o.TTL, onSent: o.OnSent,
		store: o.Payloads, limits: payload.Limits(limits), hop: MaxVisibility, plain: o.PlainDelays}
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

// SendBatch sends items as one batch: their encoded texts, compressed
// together into one blob in the payload store, and one small pointer message
// on the queue. A listener calls its handler once per item, in any order and
// in parallel (within the listener's [ScalingOptions.MaxDequeuers] ×
// [ListenerOptions.Concurrency] handler calls at once, shared with single
// messages and other batches), with the same outcome rules as for single
// messages; items that succeed are not run again when the batch is redelivered,
// and one item that keeps failing is poisoned alone. A batch costs about six
// requests end to end, whatever n (write the blob, send the pointer, a share of
// a receive, read the blob, delete the message, delete the blob), where n
// single messages cost about 2n.
//
// opts are those of [Publisher.SendWith] (nil: sent visible at once): a
// batch can be delayed, by any length, keyed, made unique and cancelled like
// a single message, and its blob lives as long as its pointer message. It
// returns the [Sent] of its pointer message, with [Sent.BatchID],
// [Sent.Items] and [Sent.BatchBytes] set.
//
// It fails before any request with a [*ConfigError] for no items or bad
// options, with [ErrNoBlobService] when the publisher has no payload store,
// and with [ErrMessageTooLarge] when the batch exceeds the publisher's
// [PayloadLimits] (the error names the limit to raise).
func (p *Publisher[T]) SendBatch(ctx context.Context, items []T, opts *SendOptions) (Sent, error) {
	if len(items) == 0 {
		return Sent{}, &ConfigError{Field: "items", Reason: "empty: a batch needs at least one"}
	}
	if p.store == nil {
		return Sent{}, wrapf(p.noStore(), "send batch")
	}
	o, r, err := p.routeFor(ctx, opts)
	if err != nil {
		return Sent{}, err
	}
	var m sentMessage
	var ptr *wire.Pointer
	err = p.unique(ctx, o, func() error {
		if p.mw == nil {
			m, ptr, _, err = p.sendBatch(ctx, items, nil, r)
			return err
		}
		s := p.outgoing(&items, r)
		s.Items, s.isBatch = len(items), true
		err := s.Next(ctx)
		m, ptr, r = s.sent, s.batch, s.route
		return err
	})
	if err != nil || ptr == nil { // nil: a middleware sent nothing
		return Sent{}, err
	}
	sent := p.sent(m, r)
	sent.BatchID, sent.Items, sent.BatchBytes = ptr.Blob, ptr.Items, ptr.Size
	return sent, nil
}

// sendBatch is SendBatch past the middleware, with the metadata to carry,
// sent as r says. It returns what the target said of the pointer message,
// the pointer, and the length of the pointer message's text.
func (p *Publisher[T]) sendBatch(ctx context.Context, items []T, meta Metadata, r route) (sentMessage, *wire.Pointer, int, error) {
	fail := func(err error) (sentMessage, *wire.Pointer, int, error) { return sentMessage{}, nil, 0, err }
	msg := wire.Text{Due: p.dueLine(r)}
	meta, stamp := p.withKey(meta, r.key)
	var err error
	if msg.Meta, err = wire.NewMeta(meta); err != nil {
		return fail(err)
	}
	w := payload.NewWriter(p.limits)
	for i, item := range items {
		text, err := p.codec.Encode(item)
		if err != nil {
			return fail(wrapf(err, "encode item %d", i))
		}
		if err := w.Add(text); err != nil {
			return fail(limitOption(err, "PublisherOptions"))
		}
	}
	ptr, err := p.offload(ctx, payload.KindBatch, w, r)
	if err != nil {
		return fail(limitOption(err, "PublisherOptions"))
	}
	msg.Pointer = ptr
	text := msg.Render()
	m, err := p.deliver(ctx, text, r)
	p.keySent(r.key, stamp, err)
	if err != nil {
		return fail(err)
	}
	m.Blob = ptr.Blob
	return m, ptr, len(text), nil
}

// route is how a message goes on the queue: visible at once or after a
// delay (to at, for SendAt), with a key or not, and with the publisher's
// TTL or its own.
type route struct {
	delay  time.Duration // whole seconds
	at     time.Time     // SendAt's time
	key    string        // "": no key
	ttl    time.Duration
	ownTTL bool             // ttl is the send's, not the publisher's
	line   bool             // a due line even within the hop: SendAt's time, before the target's clock is known
	occ    *wire.Occurrence // a Scheduler's occurrence the message is sent for: a due line always
}

// dueLine is the line that records when the message is due: for a
// message the service cannot keep hidden until then alone (see hops), and
// for one it can, so that a listener counts its time in queue from its due
// time rather than its insertion (see [wire.DueLine.Kept]). A message sent
// for now has none (nil).
func (p *Publisher[T]) dueLine(r route) *wire.DueLine {
	switch {
	case r.occ != nil:
		return &wire.DueLine{At: r.at, Occ: r.occ}
	case !p.hops(r) && (r.delay <= 0 || p.plain):
		return nil
	case !p.hops(r):
		return &wire.DueLine{After: int64(r.delay / time.Second)}
	case !r.at.IsZero():
		return &wire.DueLine{At: r.at}
	}
	return &wire.DueLine{After: int64(r.delay / time.Second)}
}

// hops reports whether a message sent as r may be hidden again by
// listeners until it is due: one due beyond the service's longest hiding,
// one sent for a time before the target's clock is known, and a
// scheduler's (which a listener may hold).
func (p *Publisher[T]) hops(r route) bool {
	return r.occ != nil || r.delay > p.hop || r.line
}

// ttlOf is how long a message sent as r says lives: a delayed one lives
// its TTL past its due time (the service would refuse a delay longer than
// the TTL, and a message that expired unseen would be lost).
func (p *Publisher[T]) ttlOf(r route) time.Duration {
	ttl := p.ttl
	if r.ownTTL {
		ttl = r.ttl
	}
	if ttl < 0 || !p.hops(r) && r.delay <= 0 {
		return ttl
	}
	if ttl == 0 {
		ttl = defaultTTL
	}
	if ttl > math.MaxInt32*time.Second-r.delay {
		return -1 // beyond what the service counts (68 years): never expires
	}
	return r.delay + ttl
}

// expires is when a message sent as r says, inserted at inserted, expires,
// in Unix seconds; 0 if never. The service counts the TTL it was sent with
// from the insertion, whatever the message's due time: a SendAt for a time
// already past is due before it was inserted.
func (p *Publisher[T]) expires(r route, inserted time.Time) int64 {
	ttl := p.ttlOf(r)
	switch {
	case ttl < 0:
		return 0
	case ttl == 0:
		ttl = defaultTTL
	}
	return inserted.Add(ttl).Unix()
}

// publish is the path of every single message: through the middleware, if
// any, to send.
// It returns the route taken: a middleware may have changed the delay.
func (p *Publisher[T]) publish(ctx context.Context, body T, r route) (sentMessage, route, error) {
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
func (p *Publisher[T]) send(ctx context.Context, body T, r route, meta Metadata) (m sentMessage, sent string, err error) {
	text, err := p.codec.Encode(body)
	if err != nil {
		return m, "", wrapf(err, "encode")
	}
	msg := wire.Text{Due: p.dueLine(r), Body: text}
	meta, stamp := p.withKey(meta, r.key)
	if msg.Meta, err = wire.NewMeta(meta); err != nil {
		return m, "", err
	}
	head := len(msg.Head())
	limit := MaxMessageSize
	if r.key != "" {
		// Room for the line a listener adds when it snoozes the message
		// while its key is at its limit, so that it need not count a try.
		limit -= snoozeRoom
	}
	if !p.hops(r) && head+len(text) > limit && len(msg.Meta.Line())+len(text) <= limit {
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
	p.keySent(r.key, stamp, err)
	if msg.Pointer != nil {
		m.Blob = msg.Pointer.Blob
	}
	return m, sent, err
}

// outgoing describes a send to the middleware; body is a *T or a *[]T.
func (p *Publisher[T]) outgoing(body any, r route) *Outgoing {
	return &Outgoing{Queue: p.target.Name(), Body: body, Key: r.key, Delay: r.delay,
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
		if err := checkKey("Outgoing.Key", s.route.key); err != nil {
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
	if err := checkKey("Outgoing.Key", s.route.key); err != nil {
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
func (p *Publisher[T]) deliver(ctx context.Context, text string, r route) (sentMessage, error) {
	opts := &SendOptions{Delay: min(r.delay, p.hop), TTL: p.ttlOf(r)}
	var m sentMessage
	var err error
	switch {
	case r.key != "" && p.caps.sendKeyed != nil:
		m, err = p.caps.sendKeyed(ctx, r.key, text, opts)
	case r.key != "" && p.caps.SendKeyed != nil:
		m.ID, err = p.caps.SendKeyed(ctx, r.key, text, opts)
	default:
		m, err = p.caps.send(ctx, text, opts)
	}
	if err != nil {
		return sentMessage{}, err
	}
	if r.delay == 0 && p.onSent != nil {
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

// withKey is meta with the message's key as [MetadataKey] and its place in
// the key's order as [MetadataOrder], or without those entries for a
// message sent with no key: the key a message carries is the one it was
// sent with, never one a handler forwarded in metadata it received. Once
// the send is over, keySent records how it went.
func (p *Publisher[T]) withKey(meta Metadata, key string) (Metadata, keyorder.Stamp) {
	_, hasKey := meta[MetadataKey]
	_, hasOrder := meta[MetadataOrder]
	if key == "" && !hasKey && !hasOrder {
		return meta, keyorder.Stamp{}
	}
	out := make(Metadata, len(meta)+2)
	for k, v := range meta {
		if k != MetadataKey && k != MetadataOrder {
			out[k] = v
		}
	}
	if key == "" {
		return out, keyorder.Stamp{}
	}
	stamp := p.order.Next(key)
	out[MetadataKey], out[MetadataOrder] = key, stamp.String()
	return out, stamp
}

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
func (p *Publisher[T]) claimCheck(ctx context.Context, text string, size int, r route) (*wire.Pointer, error) {
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

// defaultTTL is the service's message lifetime when none is given.
const defaultTTL = 7 * 24 * time.Hour

// offload writes a payload built in w, for a message sent as r says, to a
// blob and returns its pointer. The blob expires when the message does.
// The blob is written before the pointer is sent: a pointer must never name
// a blob that does not exist yet. If the send then fails, the blob is left
// for [Sweep] rather than deleted, because a send that failed on the client
// may have succeeded at the service, and deleting would leave a dangling
// pointer, which is a lost message; a leftover blob is only waste.
func (p *Publisher[T]) offload(ctx context.Context, kind string, w *payload.Writer, r route) (*wire.Pointer, error) {
	data, err := w.Finish()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	meta := payload.Meta{Kind: kind, Queue: p.target.Name(), Created: now, Items: w.Items()}
	switch ttl := p.ttlOf(r); {
	case ttl == 0:
		meta.Expires = now.Add(defaultTTL)
	case ttl > 0:
		meta.Expires = now.Add(ttl)
	}
	return p.store.put(ctx, meta, data)
}
