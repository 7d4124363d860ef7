package azdispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// Without a payload store to offload to, an oversized message is refused.
func TestPublisherRefusesAnOversizedMessageBeforeSending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := queueWithoutBlobs(t)
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)

	_, err = p.Send(ctx, strings.Repeat("a", MaxMessageSize+1))
	var tooLarge *MessageTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, MaxMessageSize, tooLarge.Limit)
	assert.Zero(t, q.Transactions().Total(), "no request made")

	// JSON escaping and base64 count: the limit applies to the encoded text.
	pj, err := NewPublisher[string](q, nil)
	require.NoError(t, err)
	_, err = pj.Send(ctx, strings.Repeat("\"", MaxMessageSize/2))
	assert.ErrorIs(t, err, ErrMessageTooLarge, "each quote is escaped to two bytes")
	pb, err := NewPublisher[string](q, &PublisherOptions{Codec: Base64(Raw())})
	require.NoError(t, err)
	_, err = pb.Send(ctx, strings.Repeat("a", MaxMessageSize*3/4+1))
	assert.ErrorIs(t, err, ErrMessageTooLarge, "base64 grows it by a third")
	assert.Zero(t, q.Transactions().Total())

	_, err = p.Send(ctx, "bell\a")
	assert.ErrorIs(t, err, ErrInvalidText)
}

func TestPublisherSendsAtTheLimitInEveryEncoding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	cases := map[string]string{
		"ascii":       strings.Repeat("a", MaxMessageSize),
		"multibyte":   strings.Repeat("é", MaxMessageSize/2),
		"xml special": strings.Repeat("<&>", MaxMessageSize/3),
	}
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	for name, body := range cases {
		_, err := p.Send(ctx, body)
		require.NoError(t, err, name)
		batch, err := q.Receive(ctx, 1, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, batch, 1)
		assert.Equal(t, body, batch[0].Text, name)
		require.NoError(t, q.Delete(ctx, batch[0]))
	}
}

func TestPublisherSendAfterDelaysDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	p, err := NewPublisher[job](q, &PublisherOptions{TTL: time.Hour})
	require.NoError(t, err)
	s, err := p.SendAfter(ctx, job{N: 7}, 2*time.Second)
	require.NoError(t, err)
	sent := time.Now()

	var got *Delivery
	waitFor(t, "delivered after the delay", func() bool {
		batch, err := q.Receive(ctx, 1, 30*time.Second)
		if err != nil || len(batch) == 0 {
			return false
		}
		got = batch[0]
		return true
	})
	assert.GreaterOrEqual(t, time.Since(sent), 1500*time.Millisecond, "not before its delay")
	assert.Equal(t, s.ID, got.ID)
	assert.True(t, got.InsertedAt.Add(2*time.Second).Equal(s.Due), "due by the service's insertion time")
	assert.Equal(t, wire.DueMagic+"{\"after\":2}\n{\"n\":7}", got.Text,
		"a delay the service keeps adds only a line saying when it is due, for its time in queue")
	assert.WithinDuration(t, got.InsertedAt.Add(time.Hour), got.ExpiresAt, 5*time.Second)
}

// A delay the service would refuse is refused before a large body is
// offloaded: no blob is left behind for a message never sent.
func TestPublisherRefusesABadDelayBeforeOffloading(t *testing.T) {
	t.Parallel()
	acct := testAccount(t, nil)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	_, err = p.SendAfter(context.Background(), strings.Repeat("x", MaxMessageSize+1), -time.Second)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Zero(t, acct.Transactions().Total(), "no request, no blob")
}

// A body over the publisher's payload limits is refused before any request
// with the one sentinel of "too large" (whichever limit it is over, and
// whether or not it would have gone to a blob), and the error names the
// option to raise. (A 100 MiB body matched ErrPayloadTooLarge where other
// sizes matched ErrMessageTooLarge, and named only "MaxItemSize".)
func TestABodyTooLargeNamesTheOptionToRaise(t *testing.T) {
	t.Parallel()
	ctx, cost := CountTransactions(context.Background())
	q := testQueue(t)
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw(), PayloadLimits: PayloadLimits{MaxItemSize: 1 << 20}})
	require.NoError(t, err)
	_, err = p.Send(ctx, strings.Repeat("x", 2<<20))
	require.ErrorIs(t, err, ErrMessageTooLarge)
	assert.ErrorIs(t, err, ErrPayloadTooLarge, "the same sentinel under its old name")
	assert.Contains(t, err.Error(), "PublisherOptions.PayloadLimits.MaxItemSize")
	assert.Contains(t, err.Error(), "ListenerOptions.Payloads.Limits.MaxItemSize")
	assert.Contains(t, err.Error(), "2097152 bytes")

	_, err = p.SendBatch(ctx, []string{"a", strings.Repeat("x", 2<<20)}, nil)
	require.ErrorIs(t, err, ErrMessageTooLarge)
	assert.Contains(t, err.Error(), "item 1")
	assert.Contains(t, err.Error(), "PublisherOptions.PayloadLimits.MaxItemSize")
	assert.Zero(t, cost().Total(), "refused before any request")
}
