package azdispatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// note is the message type of the metadata tests: a number, and padding
// to make it as large as a test needs.
type note struct {
	N   int    `json:"n"`
	Pad string `json:"pad,omitempty"`
}

// Metadata sent with a claim-checked message and with a batch reaches
// every handler call; a batch item poisoned alone keeps its batch's
// metadata in its envelope, and carries it again once requeued.
func TestMetadataSurvivesClaimCheckBatchesPoisonAndRequeue(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	meta := Metadata{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "vendor=1"}
	tag := SendMiddlewareFunc(func(ctx context.Context, s *Outgoing) error {
		s.Metadata = meta
		err := s.Next(ctx)
		if err == nil {
			assert.True(t, s.Offloaded, "both sends go to blobs")
		}
		return err
	})
	pub, err := NewPublisher[note](q, &PublisherOptions{Middleware: []SendMiddleware{tag}})
	require.NoError(t, err)
	// Small enough for a queue message alone; with the metadata line, not.
	_, err = pub.Send(ctx, note{N: 0, Pad: strings.Repeat("y", MaxMessageSize-100)})
	require.NoError(t, err)
	_, err = pub.SendBatch(ctx, []note{{N: 1}, {N: 2}, {N: 3}}, nil)
	require.NoError(t, err)

	var mu sync.Mutex
	seen := map[int][]Metadata{}
	watch := MiddlewareFunc(func(ctx context.Context, c *Call) error {
		mu.Lock()
		seen[c.Body.(*note).N] = append(seen[c.Body.(*note).N], c.Metadata)
		mu.Unlock()
		return c.Next(ctx)
	})
	var refuse atomic.Bool
	refuse.Store(true)
	l, err := NewListener(q, func(_ context.Context, m *Message[note]) error {
		if m.Body.N == 2 && refuse.Load() {
			return Permanent(errors.New("item 2 refused"))
		}
		return nil
	}, &ListenerOptions{Middleware: []Middleware{watch}, Scaling: ScalingOptions{Idle: quick().Scaling.Idle}})
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "both messages settled", func() bool { s := l.State(); return s.Succeeded == 2 && s.ItemsPoisoned == 1 })
	require.NoError(t, stop())

	batch, err := q.PoisonQueue().Receive(ctx, MaxBatch, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	env, err := ParsePoison(batch[0].Text)
	require.NoError(t, err)
	assert.NotEmpty(t, env.Batch)
	assert.Equal(t, 1, env.Item)
	got, rest, err := ParseMetadata(env.Body)
	require.NoError(t, err)
	assert.Equal(t, meta, got, "the item's envelope keeps its batch's metadata")
	assert.Equal(t, `{"n":2}`, rest)
	require.NoError(t, q.PoisonQueue().SetVisibility(ctx, batch[0], 0))

	refuse.Store(false)
	requeueAndHandle(t, q, l, 3)

	mu.Lock()
	defer mu.Unlock()
	for n := range 4 {
		require.NotEmpty(t, seen[n], "item %d ran", n)
		for _, m := range seen[n] {
			assert.Equal(t, meta, m, "call for %d", n)
		}
	}
	assert.Len(t, seen[2], 2, "item 2 ran in its batch, then requeued on its own")
}

// A batch item too large for a poison envelope has its body offloaded: the
// metadata line stays on the envelope, before the pointer, and the item
// requeued comes back with its body intact and its metadata.
func TestMetadataOfALargePoisonedItemStaysOutOfItsBlob(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	meta := Metadata{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	tag := SendMiddlewareFunc(func(ctx context.Context, s *Outgoing) error {
		s.Set("traceparent", meta["traceparent"])
		return s.Next(ctx)
	})
	pub, err := NewPublisher[note](q, &PublisherOptions{Middleware: []SendMiddleware{tag}})
	require.NoError(t, err)
	big := note{N: 1, Pad: strings.Repeat("z", MaxMessageSize)} // too large for an envelope's body
	_, err = pub.SendBatch(ctx, []note{big, {N: 2}}, nil)
	require.NoError(t, err)

	var refuse atomic.Bool
	refuse.Store(true)
	var mu sync.Mutex
	var got []note
	var seen []Metadata
	watch := MiddlewareFunc(func(ctx context.Context, c *Call) error {
		mu.Lock()
		seen = append(seen, c.Metadata)
		mu.Unlock()
		return c.Next(ctx)
	})
	l, err := NewListener(q, func(_ context.Context, m *Message[note]) error {
		if m.Body.N == 1 && refuse.Load() {
			return Permanent(errors.New("item 1 refused"))
		}
		mu.Lock()
		got = append(got, m.Body)
		mu.Unlock()
		return nil
	}, &ListenerOptions{Middleware: []Middleware{watch}, Scaling: ScalingOptions{Idle: quick().Scaling.Idle}})
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "the batch settled", func() bool { s := l.State(); return s.Succeeded == 1 && s.ItemsPoisoned == 1 })
	require.NoError(t, stop())

	refuse.Store(false)
	requeueAndHandle(t, q, l, 2)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	assert.Contains(t, got, big, "the requeued item decodes to its body, metadata not in it")
	for _, m := range seen {
		assert.Equal(t, meta, m)
	}
}

// requeueAndHandle moves the one envelope in q's poison queue back to q and
// runs l until it has handled succeeded messages in all.
func requeueAndHandle[T any](t *testing.T, q *Queue, l *Listener[T], succeeded int64) {
	t.Helper()
	res, err := Requeue(context.Background(), q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Moved)
	stop := started(t, l)
	waitFor(t, "the requeued item handled", func() bool { return l.State().Succeeded == succeeded })
	require.NoError(t, stop())
}
