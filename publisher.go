package azdispatch

import (
	"context"
	"fmt"
	"time"
)

// MaxMessageSize is the largest encoded message, in UTF-8 bytes, that a
// Publisher sends: the service's 64 KiB less PoisonHeaderReserve, so that
// every message it sends can later be moved whole into a poison queue.
const MaxMessageSize = ServiceMessageLimit - PoisonHeaderReserve

// PublisherConfig configures a Publisher. Nil means defaults.
type PublisherConfig struct {
	// Codec encodes bodies. Defaults to JSON(); listeners must use the same.
	Codec Codec
	// TTL is how long each message lives. Defaults to the service's 7 days;
	// negative means messages never expire.
	TTL time.Duration
	// OnSent, if set, is called after each successful send of a message
	// visible at once (not SendAfter with a delay), with its ID, to tell
	// listeners in other processes that work is there (an
	// HTTPNotifier's Notify, or any transport). It must not block. Listeners
	// in this process on the same *Queue are woken without it.
	OnSent func(ctx context.Context, id string)
	// Payloads is where batches and messages too large for the queue are
	// offloaded. Defaults to the target account's store (container
	// DefaultPayloadContainer); without one (a queue opened by SAS URL),
	// SendBatch and large messages fail with ErrNoBlobService.
	Payloads *PayloadStore
	// PayloadLimits are refused before any request, so that nothing is sent
	// that a listener with the same limits would poison. Zero fields mean
	// the defaults, which are also the listener's.
	PayloadLimits PayloadLimits
}

// Publisher sends typed messages to a Target. It is safe for concurrent use.
type Publisher[T any] struct {
	target Target
	codec  Codec
	ttl    time.Duration
	onSent func(ctx context.Context, id string)
	store  *PayloadStore // nil: nothing can be offloaded
	limits PayloadLimits
}

// NewPublisher returns a publisher of T values to target.
func NewPublisher[T any](target Target, cfg *PublisherConfig) (*Publisher[T], error) {
	if target == nil {
		return nil, &ConfigError{Field: "target", Reason: "nil"}
	}
	var c PublisherConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Codec == nil {
		c.Codec = JSON()
	}
	if err := checkCodecType[T](c.Codec); err != nil {
		return nil, &ConfigError{Field: "PublisherConfig.Codec", Reason: err.Error()}
	}
	limits, err := c.PayloadLimits.withDefaults("PublisherConfig.PayloadLimits")
	if err != nil {
		return nil, err
	}
	if c.Payloads == nil {
		c.Payloads = defaultPayloadStore(target)
	}
	return &Publisher[T]{target: target, codec: c.Codec, ttl: c.TTL, store: c.Payloads, limits: limits, onSent: c.OnSent}, nil
}

// Send encodes body and puts it on the queue, visible at once. It returns
// the message ID. A body that encodes to more than MaxMessageSize bytes
// (base64 and JSON escapes count; the XML escaping of the request does not,
// as the service counts the text it stores) is offloaded to the payload store
// and a pointer is sent in its place (a claim check): the listener resolves
// it before decoding, so its handler cannot tell. Without a payload store
// such a body fails with a *MessageTooLargeError, before any request.
func (p *Publisher[T]) Send(ctx context.Context, body T) (string, error) {
	return p.SendAfter(ctx, body, 0)
}

// SendAfter is Send with the message kept invisible for delay (up to 7 days,
// rounded up to whole seconds).
func (p *Publisher[T]) SendAfter(ctx context.Context, body T, delay time.Duration) (string, error) {
	text, err := p.codec.Encode(body)
	if err != nil {
		return "", fmt.Errorf("azdispatch: encode: %w", err)
	}
	// The target checks the text itself; the publisher's limit is tighter.
	// A body that looks like a pointer is offloaded too, so that a listener
	// never mistakes it for one.
	if len(text) > MaxMessageSize || isPointer(text) {
		return p.sendLarge(ctx, text, delay)
	}
	id, err := p.target.Send(ctx, text, &SendOptions{Delay: delay, TTL: p.ttl})
	if err == nil && p.onSent != nil && delay == 0 {
		p.onSent(ctx, id)
	}
	return id, err
}
