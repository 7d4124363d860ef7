package azdispatch

import (
	"context"
	"time"
)

// Message is what a handler receives: the decoded body and where it came from.
type Message[T any] struct {
	Body         T
	ID           string
	DequeueCount int64 // 1 on the first delivery; more means an earlier try failed or was cut short
	InsertedAt   time.Time
	Queue        string // the queue the message came from

	// BatchID names the batch the body is an item of (see
	// Publisher.SendBatch); empty for a message sent on its own, offloaded
	// or not. Item is the body's index in the batch, from 0. Together with
	// ID they identify an item across redeliveries.
	BatchID string
	Item    int
}

// Handler processes one message. Its result decides the message's fate:
//   - nil: the message is deleted;
//   - an error: the message is released for another try after the
//     listener's retry delay, or poisoned once it has used its tries;
//   - Permanent(err): the message is poisoned at once;
//   - a panic: recovered, and treated as an error.
//
// The context ends when the handler times out (cause ErrHandlerTimeout),
// when the listener can no longer keep the message hidden because another
// receiver may have it (cause ErrOwnershipLost), or at the end of a
// shutdown's drain (cause ErrDrainTimeout). Delivery is at least once: a
// message may be handled again after a crash or a lost delete, so handlers
// should be idempotent; DequeueCount > 1 says a retry may be under way.
type Handler[T any] func(ctx context.Context, m *Message[T]) error
