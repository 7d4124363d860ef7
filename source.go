package azdispatch

import (
	"context"
	"time"
)

// Source is what a Listener receives from: a Queue, or several queues behind
// one. Implementations in this package are safe for concurrent use. To add
// behaviour (fault injection, tracing), wrap one of them.
type Source interface {
	// Name identifies the source in logs, errors and poison envelopes.
	Name() string
	// Receive gets up to max messages (1 to MaxBatch) and hides them for
	// visibility. It returns an empty slice, not an error, when there are none.
	Receive(ctx context.Context, max int, visibility time.Duration) ([]*Delivery, error)
	// Delete removes a received message. A stale pop receipt gives an error
	// matching ErrOwnershipLost.
	Delete(ctx context.Context, d *Delivery) error
	// SetVisibility hides a received message for after from now (0 makes it
	// visible at once), keeping its text, and records the new pop receipt in d.
	SetVisibility(ctx context.Context, d *Delivery, after time.Duration) error
	// Depth is the approximate number of messages, invisible ones included.
	Depth(ctx context.Context) (int, error)
}

// Target is what messages are sent to: a Queue, or several behind one.
type Target interface {
	// Name identifies the target in logs and errors.
	Name() string
	// Send puts text on the queue and returns the new message's ID.
	Send(ctx context.Context, text string, opts *SendOptions) (string, error)
}

// SendOptions are the per-message options of a send. Nil means defaults.
type SendOptions struct {
	// Delay keeps the message invisible for this long after it is sent (up
	// to 7 days; rounded up to whole seconds, the service's unit).
	Delay time.Duration
	// TTL is how long the message lives. Zero means the service default of
	// 7 days; a negative value means it never expires.
	TTL time.Duration
}

// Delivery is one received message as the storage service returned it.
// A Delivery belongs to one goroutine at a time; the listener hands it from
// the dequeuer to a handler goroutine and never shares it.
type Delivery struct {
	ID            string
	Text          string // the message text exactly as stored
	DequeueCount  int64  // 1 on the first delivery
	InsertedAt    time.Time
	ExpiresAt     time.Time
	NextVisibleAt time.Time // when it reappears unless deleted or renewed

	popReceipt string      // changes on every update; required to delete
	from       *Queue      // the queue it came from, so deletes go back there
	route      *shardRoute // the shard of a ShardedQueue it came through, if any
}

// QueueName is the name of the queue the message came from.
func (d *Delivery) QueueName() string {
	if d.from == nil {
		return d.route.shardName() // a shard that is not a *Queue
	}
	return d.from.name
}

// Service limits, from the Azure Queue Storage documentation.
const (
	// MaxBatch is the most messages one receive may return.
	MaxBatch = 32
	// ServiceMessageLimit is the largest message text the service accepts,
	// in UTF-8 bytes (XML escaping on the wire does not count).
	ServiceMessageLimit = 64 * 1024
	// MaxVisibility is the longest a message can be hidden.
	MaxVisibility = 7 * 24 * time.Hour
)
