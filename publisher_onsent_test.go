package azdispatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// sentIDs records the IDs OnSent hears of.
type sentIDs struct {
	mu  sync.Mutex
	ids []string
}

func (s *sentIDs) onSent(_ context.Context, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
}

// take returns the IDs heard since the last take.
func (s *sentIDs) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.ids
	s.ids = nil
	return ids
}

// receiveOne receives the one message on src, checks it is the one sent
// with id, and deletes it.
func receiveOne(t *testing.T, src Source, id string) *Delivery {
	t.Helper()
	ctx := context.Background()
	batch, err := src.Receive(ctx, MaxBatch, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	assert.Equal(t, id, batch[0].ID, "OnSent's ID is the message's")
	require.NoError(t, src.Delete(ctx, batch[0]))
	return batch[0]
}

func TestOnSentIsCalledForAnInlineSend(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	var heard sentIDs
	p, err := NewPublisher[job](q, &PublisherOptions{OnSent: heard.onSent})
	require.NoError(t, err)
	sent, err := p.Send(context.Background(), job{N: 1})
	require.NoError(t, err)
	id := sent.ID
	assert.Equal(t, []string{id}, heard.take())
	receiveOne(t, q, id)

	_, err = p.SendAfter(context.Background(), job{N: 2}, time.Hour)
	require.NoError(t, err)
	assert.Empty(t, heard.take(), "a delayed message is not there to be woken for")
}

func TestOnSentIsCalledForALargeMessage(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	var heard sentIDs
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw(), OnSent: heard.onSent})
	require.NoError(t, err)
	sent, err := p.Send(context.Background(), strings.Repeat("large ", MaxMessageSize/4))
	require.NoError(t, err)
	id := sent.ID
	assert.Equal(t, []string{id}, heard.take())
	d := receiveOne(t, q, id)
	assert.True(t, strings.HasPrefix(d.Text, wire.PointerMagic), "it was offloaded")
}

func TestOnSentIsCalledForABatch(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	var heard sentIDs
	p, err := NewPublisher[job](q, &PublisherOptions{OnSent: heard.onSent})
	require.NoError(t, err)
	sent, err := p.SendBatch(context.Background(), []job{{N: 1}, {N: 2}, {N: 3}}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{sent.ID}, heard.take())
	receiveOne(t, q, sent.ID)
}

func TestOnSentIsCalledForAKeyedSend(t *testing.T) {
	t.Parallel()
	acct := testAccount(t, nil)
	sq := shardedQueue(t, 3, nil, acct)
	store, err := acct.PayloadStore("")
	require.NoError(t, err)
	var heard sentIDs
	p, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw(), OnSent: heard.onSent, Payloads: store})
	require.NoError(t, err)

	sent, err := p.SendKeyed(context.Background(), "customer-7", "small")
	require.NoError(t, err)
	id := sent.ID
	assert.Equal(t, []string{id}, heard.take())
	d := receiveOne(t, sq, id)
	assert.Equal(t, sq.Shards()[KeyShard("customer-7", 3)].Name(), d.Queue, "on the key's shard")

	sent, err = p.SendKeyed(context.Background(), "customer-7", strings.Repeat("large ", MaxMessageSize/4))
	require.NoError(t, err, "a keyed message too large for the queue is offloaded")
	id = sent.ID
	assert.Equal(t, []string{id}, heard.take())
	d = receiveOne(t, sq, id)
	assert.Equal(t, sq.Shards()[KeyShard("customer-7", 3)].Name(), d.Queue, "on the key's shard")
	meta, rest, err := ParseMetadata(d.Text)
	require.NoError(t, err)
	assert.Equal(t, "customer-7", meta[MetadataKey], "the key travels in the text")
	assert.True(t, strings.HasPrefix(rest, wire.PointerMagic), "it was offloaded")
}

// A keyed message goes through the same pipeline as any other: one too large
// for the queue and one whose text would pass for a pointer are both
// offloaded, and reach the handler exactly as sent, from the key's shard.
func TestKeyedLargeAndPointerLikeBodiesRoundTripThroughAShardedQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acct := testAccount(t, nil)
	sq := shardedQueue(t, 3, nil, acct)
	store, err := acct.PayloadStore("")
	require.NoError(t, err)
	p, err := NewPublisher[string](sq, &PublisherOptions{Codec: Raw(), Payloads: store})
	require.NoError(t, err)

	const key = "tenant-42"
	bodies := map[string]bool{
		strings.Repeat("x", MaxMessageSize+1):                                            true,
		wire.PointerMagic + `{"kind":"single","blob":"` + strings.Repeat("0", 32) + `"}`: true,
		"plain": true,
	}
	for body := range bodies {
		_, err := p.SendKeyed(ctx, key, body)
		require.NoError(t, err)
	}
	want := make([]int, 3)
	want[KeyShard(key, 3)] = len(bodies)
	assert.Equal(t, want, shardDepths(t, sq), "every message of the key on its shard")

	var mu sync.Mutex
	got := map[string]string{} // body → shard
	l, err := NewListener(sq, func(_ context.Context, m *Message[string]) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.Body] = m.Queue
		return nil
	}, &ListenerOptions{Codec: Raw(), Payloads: PayloadOptions{Store: store}, Scaling: ScalingOptions{Idle: ExponentialIdle(0, 200*time.Millisecond)}})
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all handled", func() bool { return l.State().Succeeded == int64(len(bodies)) })
	require.NoError(t, stop())
	assert.Zero(t, l.State().Poisoned)
	require.Len(t, got, len(bodies), "each body arrived intact")
	for body, shard := range got {
		assert.True(t, bodies[body], "a body that was not sent: %.40q", body)
		assert.Equal(t, sq.Shards()[KeyShard(key, 3)].Name(), shard)
	}
}
