package azdispatch

import (
	"context"
	"fmt"
)

// SentBatch describes a batch that SendBatch put on the queue.
type SentBatch struct {
	MessageID string // the pointer message's ID
	BatchID   string // the payload blob's name; each item's Message.BatchID
	Items     int
	Size      int64 // bytes stored in the blob (gzip)
}

// SendBatch sends items as one batch: their encoded texts, compressed
// together into one blob in the payload store, and one small pointer message
// on the queue. A listener calls its handler once per item, in any order and
// in parallel (within the listener's MaxDequeuers × Concurrency handler
// calls at once, shared with single messages and other batches), with the
// same outcome rules as for single messages; items
// that succeed are not run again when the batch is redelivered, and one item
// that keeps failing is poisoned alone. A batch costs about six requests end
// to end, whatever n (write the blob, send the pointer, a share of a
// receive, read the blob, delete the message, delete the blob), where n
// single messages cost about 2n.
//
// It fails before any request with ErrEmptyBatch, with ErrNoBlobService when
// the publisher has no payload store, and with ErrPayloadTooLarge when the
// batch exceeds the publisher's PayloadLimits.
func (p *Publisher[T]) SendBatch(ctx context.Context, items []T) (SentBatch, error) {
	if len(items) == 0 {
		return SentBatch{}, ErrEmptyBatch
	}
	if p.store == nil {
		return SentBatch{}, fmt.Errorf("azdispatch: send batch: %w", ErrNoBlobService)
	}
	w := newFrameWriter(p.limits)
	for i, item := range items {
		text, err := p.codec.Encode(item)
		if err != nil {
			return SentBatch{}, fmt.Errorf("azdispatch: encode item %d: %w", i, err)
		}
		if err := w.add(text); err != nil {
			return SentBatch{}, err
		}
	}
	ptr, err := p.offload(ctx, kindBatch, w)
	if err != nil {
		return SentBatch{}, err
	}
	id, err := p.target.Send(ctx, ptr.encode(), &SendOptions{TTL: p.ttl})
	if err != nil {
		return SentBatch{}, err
	}
	return SentBatch{MessageID: id, BatchID: ptr.Blob, Items: ptr.Items, Size: ptr.Size}, nil
}
