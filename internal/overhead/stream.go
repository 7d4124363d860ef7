package overhead

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Stream is a minimal in-memory [azdispatch.Source]: it hands out n copies
// of Text, each once, and counts deletes. It keeps no message, so the only
// heap that lives through a drain is the consumer's own: the garbage
// collector's cost per message is then that of what the consumer
// allocates, as in a worker whose queue is a service, where a memqueue
// filled in advance holds every message on the heap and makes each byte a
// consumer allocates cost a share of marking all of them.
type Stream struct {
	mu      sync.Mutex
	left    int
	next    int64
	deleted atomic.Int64
}

// NewStream returns a Stream of n messages.
func NewStream(n int) *Stream { return &Stream{left: n} }

// errNotKept is what Stream answers to what only a queue that keeps its
// messages could do.
var errNotKept = errors.New("overhead: a stream keeps no message to hide again")

// Name implements azdispatch.Source.
func (s *Stream) Name() string { return "stream" }

// Receive implements azdispatch.Source: up to max of the messages left,
// in one allocation for their deliveries.
func (s *Stream) Receive(_ context.Context, max int, _ time.Duration) ([]*azdispatch.Delivery, error) {
	s.mu.Lock()
	k := min(max, s.left)
	s.left -= k
	first := s.next
	s.next += int64(k)
	s.mu.Unlock()
	if k == 0 {
		return nil, nil
	}
	now := time.Now()
	ds := make([]azdispatch.Delivery, k)
	out := make([]*azdispatch.Delivery, k)
	for i := range ds {
		id := strconv.FormatInt(first+int64(i), 10)
		ds[i] = azdispatch.Delivery{ID: id, Text: Text, DequeueCount: 1, InsertedAt: now, ReceivedAt: now, Receipt: id}
		out[i] = &ds[i]
	}
	return out, nil
}

// Delete implements azdispatch.Source: it counts the delete.
func (s *Stream) Delete(context.Context, *azdispatch.Delivery) error {
	s.deleted.Add(1)
	return nil
}

// SetVisibility implements azdispatch.Source: a drain never retries, so a
// stream refuses it.
func (s *Stream) SetVisibility(context.Context, *azdispatch.Delivery, time.Duration) error {
	return errNotKept
}

// Depth implements azdispatch.Source: the messages not yet received.
func (s *Stream) Depth(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left, nil
}

// Deleted is how many messages were deleted.
func (s *Stream) Deleted() int64 { return s.deleted.Load() }
