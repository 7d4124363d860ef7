package azdispatch

import (
	"context"
	"fmt"
	"time"
)

// defaultTTL is the service's message lifetime when none is given.
const defaultTTL = 7 * 24 * time.Hour

// sendLarge offloads one encoded message that cannot go on the queue as it
// is (the claim check): its text goes to a payload blob, and a pointer goes
// on the queue. The listener resolves the pointer before decoding, so the
// handler sees the same body either way.
func (p *Publisher[T]) sendLarge(ctx context.Context, text string, delay time.Duration) (string, error) {
	if p.store == nil {
		var why error = &MessageTooLargeError{Size: len(text), Limit: MaxMessageSize}
		if len(text) <= MaxMessageSize {
			why = fmt.Errorf("azdispatch: message text starts with the reserved %q", pointerMagic)
		}
		return "", fmt.Errorf("%w; offloading it needs a payload store: %w", why, ErrNoBlobService)
	}
	w := newFrameWriter(p.limits)
	if err := w.add(text); err != nil {
		return "", err
	}
	ptr, err := p.offload(ctx, kindSingle, w)
	if err != nil {
		return "", err
	}
	return p.target.Send(ctx, ptr.encode(), &SendOptions{Delay: delay, TTL: p.ttl})
}

// offload writes a payload built in w to a blob and returns its pointer.
// The blob is written before the pointer is sent: a pointer must never name
// a blob that does not exist yet. If the send then fails, the blob is left
// for Sweep rather than deleted, because a send that failed on the client
// may have succeeded at the service, and deleting would leave a dangling
// pointer, which is a lost message; a leftover blob is only waste.
func (p *Publisher[T]) offload(ctx context.Context, kind string, w *frameWriter) (*pointer, error) {
	data, err := w.finish()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	meta := blobMeta{kind: kind, queue: p.target.Name(), created: now, items: w.items}
	switch {
	case p.ttl == 0:
		meta.expires = now.Add(defaultTTL)
	case p.ttl > 0:
		meta.expires = now.Add(p.ttl)
	}
	return p.store.put(ctx, meta, data)
}
