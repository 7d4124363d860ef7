package sourcetest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// TestOwnSource checks a Source written here, as a user would write one:
// a list in memory on a clock of its own, with a Peek method and a poison
// queue beside it. The suite says which optional methods it offers.
func TestOwnSource(t *testing.T) {
	t.Parallel()
	h := &listHarness{}
	sourcetest.Run(t, h)
	sourcetest.RunListener(t, h)
	assert.Equal(t, []string{"Peek", "PoisonQueue"}, sourcetest.Offered(azdispatch.CapabilitiesOf(h.NewQueue(t))))
}

// listHarness makes listQueues, each on a clock of its own.
type listHarness struct{ made atomic.Int64 }

func (h *listHarness) NewQueue(*testing.T) azdispatch.Shard {
	clock := &listClock{now: time.Now()}
	name := fmt.Sprintf("list-%d", h.made.Add(1))
	return &listQueue{name: name, clock: clock, poison: &listQueue{name: name + "-poison", clock: clock}}
}

func (h *listHarness) Advance(_ *testing.T, q azdispatch.Shard, d time.Duration) {
	q.(*listQueue).clock.advance(d)
}

// Behaviour: the service's, with an exact count and this machine's clock.
func (h *listHarness) Behaviour() sourcetest.Behaviour {
	b := sourcetest.Service()
	b.Name, b.ExactDepth, b.ClockSkew = "listQueue", true, 2*time.Second
	return b
}

// listClock is a clock a test moves.
type listClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *listClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.UTC().Truncate(time.Second) // the service's times are whole seconds
}

func (c *listClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// listQueue is a queue of messages in a list. It is all a Source and a
// Target need, plus Peek and PoisonQueue.
type listQueue struct {
	name   string
	clock  *listClock
	poison *listQueue // nil for a poison queue

	mu     sync.Mutex
	msgs   []*listMessage
	nextID int
}

type listMessage struct {
	id, text                     string
	inserted, expires, visibleAt time.Time
	dequeues                     int64
	receipt                      int // the current receipt; the previous ones are stale
}

// listReceipt is a Delivery's Receipt: the queue and the receipt's number.
type listReceipt struct {
	q *listQueue
	n int
}

const maxText = 64 * 1024

// never is when a message with a negative TTL expires, as the service says.
var never = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

func (q *listQueue) Name() string { return q.name }

func (q *listQueue) PoisonQueue() azdispatch.Shard {
	if q.poison == nil {
		return nil
	}
	return q.poison
}

func (q *listQueue) Send(_ context.Context, text string, opts *azdispatch.SendOptions) (string, error) {
	if len(text) > maxText {
		return "", &azdispatch.MessageTooLargeError{Size: len(text), Limit: maxText}
	}
	if !utf8.ValidString(text) || strings.ContainsFunc(text, func(r rune) bool { return r < ' ' && r != '\t' && r != '\n' && r != '\r' }) {
		return "", fmt.Errorf("list queue %s: %w", q.name, azdispatch.ErrInvalidText)
	}
	var o azdispatch.SendOptions
	if opts != nil {
		o = *opts
	}
	delay, ttl := wholeSeconds(o.Delay), wholeSeconds(o.TTL)
	if ttl > 0 && delay >= ttl {
		return "", &azdispatch.StorageError{Op: azdispatch.OpSend, Queue: q.name, StatusCode: http.StatusBadRequest, Code: "InvalidQueryParameterValue"}
	}
	now := q.clock.read()
	m := &listMessage{text: text, inserted: now, visibleAt: now.Add(delay), expires: now.Add(7 * 24 * time.Hour)}
	switch {
	case o.TTL < 0:
		m.expires = never
	case ttl > 0:
		m.expires = now.Add(ttl)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	m.id = fmt.Sprintf("%s-%d", q.name, q.nextID)
	q.msgs = append(q.msgs, m)
	return m.id, nil
}

func (q *listQueue) Receive(_ context.Context, max int, visibility time.Duration) ([]*azdispatch.Delivery, error) {
	if max < 1 || max > azdispatch.MaxBatch || visibility <= 0 {
		return nil, fmt.Errorf("list queue %s: receive of %d for %v", q.name, max, visibility)
	}
	now := q.clock.read()
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*azdispatch.Delivery
	for _, m := range q.msgs {
		if len(out) == max || m.visibleAt.After(now) || !m.expires.After(now) {
			continue
		}
		m.dequeues++
		m.receipt++
		m.visibleAt = now.Add(visibility)
		out = append(out, q.delivery(m, now))
	}
	return out, nil
}

func (q *listQueue) Peek(_ context.Context, max int) ([]*azdispatch.Delivery, error) {
	now := q.clock.read()
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*azdispatch.Delivery
	for _, m := range q.msgs {
		if len(out) < max && !m.visibleAt.After(now) && m.expires.After(now) {
			d := q.delivery(m, now)
			d.Receipt = nil // a peek gives no receipt
			out = append(out, d)
		}
	}
	return out, nil
}

func (q *listQueue) delivery(m *listMessage, now time.Time) *azdispatch.Delivery {
	return &azdispatch.Delivery{ID: m.id, Text: m.text, DequeueCount: m.dequeues, InsertedAt: m.inserted,
		ExpiresAt: m.expires, NextVisibleAt: m.visibleAt, ReceivedAt: now, Queue: q.name,
		Receipt: &listReceipt{q: q, n: m.receipt}}
}

// held finds the message d's receipt holds, under q.mu: an error matching
// ErrOwnershipLost if it is gone or the receipt stale.
func (q *listQueue) held(op azdispatch.Op, d *azdispatch.Delivery) (int, error) {
	r, ok := d.Receipt.(*listReceipt)
	if !ok || r.q != q {
		return 0, errors.New("list queue " + q.name + ": the delivery is another queue's")
	}
	for i, m := range q.msgs {
		if m.id == d.ID && m.receipt == r.n {
			return i, nil
		}
	}
	return 0, &azdispatch.StorageError{Op: op, Queue: q.name, StatusCode: http.StatusNotFound, Code: "MessageNotFound"}
}

func (q *listQueue) Delete(_ context.Context, d *azdispatch.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	i, err := q.held(azdispatch.OpDelete, d)
	if err != nil {
		return err
	}
	q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
	return nil
}

func (q *listQueue) SetVisibility(_ context.Context, d *azdispatch.Delivery, after time.Duration) error {
	now := q.clock.read()
	q.mu.Lock()
	defer q.mu.Unlock()
	i, err := q.held(azdispatch.OpUpdate, d)
	if err != nil {
		return err
	}
	m := q.msgs[i]
	m.receipt++
	m.text, m.visibleAt = d.Text, now.Add(wholeSeconds(after))
	d.Receipt, d.NextVisibleAt = &listReceipt{q: q, n: m.receipt}, m.visibleAt
	return nil
}

// wholeSeconds rounds d up to whole seconds, the service's unit.
func wholeSeconds(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

func (q *listQueue) Depth(context.Context) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs), nil
}
