package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// keyRig is a sharded queue over three in-memory queues.
func keyRig(t *testing.T) (*azdispatch.ShardedQueue, []*memqueue.Queue) {
	t.Helper()
	var qs []*memqueue.Queue
	var shards []azdispatch.Shard
	for i := range 3 {
		q := memqueue.New(fmt.Sprintf("keyed-%d", i), nil)
		qs, shards = append(qs, q), append(shards, q)
	}
	sq, err := azdispatch.NewShardedQueue("keyed", shards, nil)
	require.NoError(t, err)
	return sq, qs
}

// depths is each queue's depth, hidden messages included.
func depths(t *testing.T, qs []*memqueue.Queue) []int {
	t.Helper()
	var ds []int
	for _, q := range qs {
		d, err := q.Depth(context.Background())
		require.NoError(t, err)
		ds = append(ds, d)
	}
	return ds
}

// A key is one thing however a send gives it: SendKeyed, SendOptions.Key
// (with a delay, too), or a send middleware that sets Outgoing.Key. Each puts
// the message on the key's shard.
func TestAKeyIsTheSameHoweverASendGivesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const key = "customer-7"
	sq, qs := keyRig(t)
	setKey := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		if s.Key == "" {
			s.Key = key
		}
		return s.Next(ctx)
	})
	plain, err := azdispatch.NewPublisher[string](sq, nil)
	require.NoError(t, err)
	viaMiddleware, err := azdispatch.NewPublisher[string](sq, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{setKey},
	})
	require.NoError(t, err)

	sends := map[string]func() (azdispatch.Sent, error){
		"SendKeyed":       func() (azdispatch.Sent, error) { return plain.SendKeyed(ctx, key, "a") },
		"SendOptions.Key": func() (azdispatch.Sent, error) { return plain.SendWith(ctx, "b", &azdispatch.SendOptions{Key: key}) },
		"Key and Delay": func() (azdispatch.Sent, error) {
			return plain.SendWith(ctx, "c", &azdispatch.SendOptions{Key: key, Delay: time.Hour})
		},
		"Outgoing.Key":        func() (azdispatch.Sent, error) { return viaMiddleware.Send(ctx, "d") },
		"Outgoing.Key, later": func() (azdispatch.Sent, error) { return viaMiddleware.SendAfter(ctx, "e", time.Minute) },
	}
	want := make([]int, len(qs))
	for name, send := range sends {
		sent, err := send()
		require.NoError(t, err, name)
		assert.NotEmpty(t, sent.ID, name)
		want[azdispatch.KeyShard(key, len(qs))]++
		assert.Equal(t, want, depths(t, qs), "%s: on the key's shard", name)
	}
}

// A key given to a target that cannot keep a key's messages together still
// travels in the text, whichever way the publisher was given it, so that
// the handler reads it and a key limit holds; a Target's own Send takes no
// key, and a key too long to carry is refused before anything is sent.
func TestAKeyForATargetThatIsNotKeyedTravelsInTheText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := memqueue.New("plain", nil)
	setKey := azdispatch.SendMiddlewareFunc(func(ctx context.Context, s *azdispatch.Outgoing) error {
		s.Key = "customer-7"
		return s.Next(ctx)
	})
	plain, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	viaMiddleware, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{setKey},
	})
	require.NoError(t, err)

	for name, send := range map[string]func() (azdispatch.Sent, error){
		"SendKeyed": func() (azdispatch.Sent, error) { return plain.SendKeyed(ctx, "customer-7", "a") },
		"SendOptions.Key": func() (azdispatch.Sent, error) {
			return plain.SendWith(ctx, "b", &azdispatch.SendOptions{Key: "customer-7"})
		},
		"Outgoing.Key": func() (azdispatch.Sent, error) { return viaMiddleware.Send(ctx, "c") },
	} {
		_, err := send()
		require.NoError(t, err, name)
	}
	msgs, err := q.Peek(ctx, 32)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	for _, m := range msgs {
		meta, _, err := azdispatch.ParseMetadata(m.Text)
		require.NoError(t, err)
		assert.Equal(t, "customer-7", meta[azdispatch.MetadataKey])
	}

	_, err = q.Send(ctx, "d", &azdispatch.SendOptions{Key: "customer-7"})
	var ce *azdispatch.ConfigError
	require.True(t, errors.As(err, &ce), "a Target's own Send: %v", err)
	assert.Equal(t, "SendOptions.Key", ce.Field, "the option named")
	_, err = plain.SendKeyed(ctx, strings.Repeat("k", azdispatch.MaxKeyLength+1), "e")
	require.True(t, errors.As(err, &ce), "too long: %v", err)
	assert.Equal(t, "SendOptions.Key", ce.Field)
	_, err = plain.SendKeyed(ctx, "a\x00b", "e")
	require.True(t, errors.As(err, &ce), "text XML cannot carry: %v", err)

	sq, _ := keyRig(t)
	p, err := azdispatch.NewPublisher[string](sq, nil)
	require.NoError(t, err)
	_, err = p.SendKeyed(ctx, "", "e")
	require.True(t, errors.As(err, &ce), "an empty key is a mistake, not round robin: %v", err)
	assert.Equal(t, "SendKeyed's key", ce.Field)
}

// Every send says what it sent in one [azdispatch.Sent]: a plain send's has
// its ID and due time, and no batch fields.
func TestEverySendReturnsASent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := memqueue.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q := memqueue.New("sent", &memqueue.Options{Clock: clock})
	p, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	now, err := p.Send(ctx, "now")
	require.NoError(t, err)
	later, err := p.SendAfter(ctx, "later", time.Minute)
	require.NoError(t, err)
	for _, s := range []azdispatch.Sent{now, later} {
		assert.NotEmpty(t, s.ID)
		assert.Empty(t, s.BatchID)
		assert.Zero(t, s.Items)
		assert.Zero(t, s.BatchBytes)
	}
	assert.Equal(t, time.Minute, later.Due.Sub(now.Due), "due a minute after the one sent now")
}

// A keyed message carries its place in its key's order (MetadataOrder): the
// key's last message whose send had succeeded when it began. Metadata a
// handler forwards loses the key and the place it was given: a message's
// are its own send's.
func TestAKeyedMessageNamesTheOneItFollows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stampOf := func(id string) []string {
		t.Helper()
		msgs, err := b.queue.Peek(b.ctx, 32)
		require.NoError(t, err)
		for _, m := range msgs {
			if m.ID == id {
				meta, _, err := azdispatch.ParseMetadata(m.Text)
				require.NoError(t, err)
				return strings.Split(meta[azdispatch.MetadataOrder], ".")
			}
		}
		t.Fatalf("message %s not found", id)
		return nil
	}
	first, err := b.pub.SendKeyed(b.ctx, "k", "a")
	require.NoError(t, err)
	f := stampOf(first.ID)
	require.Len(t, f, 3)
	assert.Equal(t, "0", f[2], "a key's first message follows none")

	forwarded := azdispatch.Metadata{azdispatch.MetadataKey: "other", azdispatch.MetadataOrder: "0000000000000000.9.8", "trace": "x"}
	second, err := b.pub.SendWith(b.ctx, "b", &azdispatch.SendOptions{Key: "k"})
	require.NoError(t, err)
	s := stampOf(second.ID)
	assert.Equal(t, f[0], s[0], "one publisher")
	assert.Equal(t, f[1], s[2], "the second follows the first")

	forwarding, err := azdispatch.NewPublisher[string](b.queue, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{azdispatch.SendMiddlewareFunc(func(ctx context.Context, o *azdispatch.Outgoing) error {
			o.Metadata = forwarded
			return o.Next(ctx)
		})},
	})
	require.NoError(t, err)
	plain, err := forwarding.Send(b.ctx, "c")
	require.NoError(t, err)
	msgs, err := b.queue.Peek(b.ctx, 32)
	require.NoError(t, err)
	for _, m := range msgs {
		if m.ID == plain.ID {
			meta, _, err := azdispatch.ParseMetadata(m.Text)
			require.NoError(t, err)
			assert.Equal(t, azdispatch.Metadata{"trace": "x"}, meta, "no key, no place in an order")
		}
	}
}
