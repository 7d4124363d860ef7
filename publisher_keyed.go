package azdispatch

import (
	"context"
	"fmt"
)

// KeyedTarget is a Target that can keep all messages of a key together,
// such as a ShardedQueue, which puts them on one shard.
type KeyedTarget interface {
	Target
	// SendKeyed puts text where every message with this key goes.
	SendKeyed(ctx context.Context, key, text string, opts *SendOptions) (string, error)
}

// SendKeyed encodes body and sends it with key, so that every message of the
// key lands on the same shard and so reaches the same listener instance (see
// ShardedQueue.SendKeyed and Subset). The publisher's target must be a
// KeyedTarget; a plain Queue is not, because it has no choice to make.
func (p *Publisher[T]) SendKeyed(ctx context.Context, key string, body T) (string, error) {
	kt, ok := p.target.(KeyedTarget)
	if !ok {
		return "", &ConfigError{Field: "target", Reason: fmt.Sprintf("%q cannot send with a key (it is not a KeyedTarget)", p.target.Name())}
	}
	text, err := p.codec.Encode(body)
	if err != nil {
		return "", fmt.Errorf("azdispatch: encode: %w", err)
	}
	if len(text) > MaxMessageSize {
		return "", &MessageTooLargeError{Size: len(text), Limit: MaxMessageSize}
	}
	return kt.SendKeyed(ctx, key, text, &SendOptions{TTL: p.ttl})
}
