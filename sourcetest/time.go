package sourcetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// testDelay checks that a message sent with a delay is there (counted) but
// not received until the delay has passed.
func testDelay(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	start := time.Now()
	id := send(t, q, "later", &azdispatch.SendOptions{Delay: short})
	assertHiddenFor(t, q, b, start, short, "a delayed message is hidden until due")
	assertDepth(t, q, b, 1, "a delayed message is counted")

	h.Advance(t, q, advance)
	d := receiveOne(t, q, long)
	assert.Equal(t, id, d.ID)
	assert.EqualValues(t, 1, d.DequeueCount, "the delay is no delivery")
	require.NoError(t, q.Delete(context.Background(), d))
}

// testDelayPastTTL checks that a message whose delay would outlast its TTL
// (or end with it) is refused and not stored: the service documents that a
// message's visibility may not reach past its expiry, and Azurite answers
// 400 InvalidQueryParameterValue.
func testDelayPastTTL(t *testing.T, h Harness) {
	q := h.NewQueue(t)
	for _, o := range []azdispatch.SendOptions{{Delay: 2 * short, TTL: short}, {Delay: short, TTL: short}} {
		_, err := q.Send(context.Background(), "never seen", &o)
		assert.Error(t, err, "delay %v, TTL %v", o.Delay, o.TTL)
	}
	// Waited for: a ShardedQueue backs off every shard that answered 400,
	// and its Depth fails until they are tried again.
	assert.Eventually(t, func() bool {
		n, err := q.Depth(context.Background())
		return err == nil && n == 0
	}, patience, poll, "nothing stored")
}

// testExpiry checks that a message past its TTL is not received, while one
// sent beside it with the default TTL is. (The count may still include the
// expired one until it is purged: the suite does not read it.)
func testExpiry(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	send(t, q, "short-lived", &azdispatch.SendOptions{TTL: short})
	keep := send(t, q, "long-lived", nil)

	h.Advance(t, q, advance)
	d := receiveOne(t, q, long)
	assert.Equal(t, keep, d.ID, "only the message within its TTL is received")
	assertNoneVisible(t, q, b, "an expired message is not received")
}

// testExpiresAt checks that a TTL sets ExpiresAt, and that a negative TTL
// means never: the service reports the last second of the year 9999.
func testExpiresAt(t *testing.T, h Harness) {
	q := h.NewQueue(t)
	never := send(t, q, "forever", &azdispatch.SendOptions{TTL: -1})
	hour := send(t, q, "an hour", &azdispatch.SendOptions{TTL: time.Hour})
	for _, d := range receiveN(t, q, 2, long) {
		switch d.ID {
		case never:
			assert.Equal(t, 9999, d.ExpiresAt.UTC().Year(), "ExpiresAt of a message that never expires: %v", d.ExpiresAt)
		case hour:
			assertNear(t, d.InsertedAt.Add(time.Hour), d.ExpiresAt, time.Second, "ExpiresAt is InsertedAt + TTL")
		default:
			t.Errorf("received ID %q was never sent", d.ID)
		}
	}
}

// testDepth checks that Depth counts every message, those hidden by a
// receive included, and not those deleted.
func testDepth(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	assertDepth(t, q, b, 0, "a new queue is empty")
	for range 3 {
		send(t, q, "counted", nil)
	}
	got := receiveN(t, q, 2, long)
	assertDepth(t, q, b, 3, "hidden messages are counted")
	require.NoError(t, q.Delete(context.Background(), got[0]))
	assertDepth(t, q, b, 2, "a deleted message is not")
}
