package sourcetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// testReappears checks that a received message is hidden, comes back once
// its visibility timeout ends with its dequeue count raised and a new
// receipt, and that the old receipt is then refused while the new one works.
func testReappears(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	id := send(t, q, "come back", nil)
	start := time.Now()
	d1 := receiveOne(t, q, short)
	assertHiddenFor(t, q, b, start, short, "a received message is hidden")

	h.Advance(t, q, advance)
	d2 := receiveOne(t, q, long)
	assert.Equal(t, id, d2.ID)
	assert.Equal(t, "come back", d2.Text)
	assert.EqualValues(t, 2, d2.DequeueCount, "every receive raises the dequeue count")

	assertRefused(t, q.Delete(ctx, d1), b.StaleReceipt, b)
	assertRefused(t, q.SetVisibility(ctx, d1, 0), b.StaleReceipt, b)
	require.NoError(t, q.Delete(ctx, d2), "the new receipt works")
	assertDepth(t, q, b, 0, "deleted with the new receipt")
}

// testRelease checks that SetVisibility(0) makes a message visible at once,
// without raising its dequeue count, and gives it a new receipt: the one
// before the update, and then the update's once the message is received
// again, are refused.
func testRelease(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	id := send(t, q, "release me", nil)
	d1 := receiveOne(t, q, long)
	before := *d1
	start := time.Now()
	require.NoError(t, q.SetVisibility(ctx, d1, 0))
	assert.WithinRange(t, d1.NextVisibleAt, start.Add(-b.ClockSkew-time.Second), time.Now().Add(b.ClockSkew+time.Second),
		"NextVisibleAt is now")
	if !sameReceipt(&before, d1) {
		// The Source put a new receipt in d1: the copy holds the old one.
		assertRefused(t, q.Delete(ctx, &before), b.StaleReceipt, b)
	}

	d2 := receiveOne(t, q, long) // no time passes: visible at once
	assert.Equal(t, id, d2.ID)
	assert.Equal(t, "release me", d2.Text, "an update keeps the text")
	assert.EqualValues(t, 2, d2.DequeueCount, "one more receive, not one more for the update")
	assertRefused(t, q.Delete(ctx, d1), b.StaleReceipt, b)
	require.NoError(t, q.Delete(ctx, d2))
}

// testHide checks that SetVisibility with a duration hides a message for
// that long from now, may be repeated with the receipt each call records
// (a renewal), and keeps the text.
func testHide(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	id := send(t, q, "hide me", nil)
	d := receiveOne(t, q, long)
	require.NoError(t, q.SetVisibility(ctx, d, long), "a renewal")
	start := time.Now()
	require.NoError(t, q.SetVisibility(ctx, d, short), "a second update, with the receipt the first recorded")
	assert.WithinRange(t, d.NextVisibleAt, start.Add(short-b.ClockSkew-time.Second), time.Now().Add(short+b.ClockSkew+time.Second),
		"NextVisibleAt is the new visibility from now")
	assertHiddenFor(t, q, b, start, short, "hidden by SetVisibility")

	h.Advance(t, q, advance)
	d2 := receiveOne(t, q, long)
	assert.Equal(t, id, d2.ID)
	assert.Equal(t, "hide me", d2.Text, "an update keeps the text")
	assert.EqualValues(t, 2, d2.DequeueCount)
	require.NoError(t, q.Delete(ctx, d2))
}

// testReceiptOutlivesVisibility checks that a receipt still works after the
// visibility timeout has ended if nobody received the message since: only a
// later receive or update makes it stale, so a slow handler whose message
// nobody took can still delete it, or hide it again.
func testReceiptOutlivesVisibility(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	send(t, q, "slow", nil)
	send(t, q, "slower", nil)
	got := receiveN(t, q, 2, short)

	h.Advance(t, q, advance)
	require.NoError(t, q.Delete(ctx, got[0]), "a delete after the visibility timeout")
	require.NoError(t, q.SetVisibility(ctx, got[1], long), "an update after the visibility timeout")
	assertNoneVisible(t, q, b, "one deleted, the other hidden again")
	require.NoError(t, q.Delete(ctx, got[1]), "with the update's receipt")
	assertDepth(t, q, b, 0, "both deleted")
}

// testDeleteTwice checks that a receipt of a deleted message is refused,
// matching ErrOwnershipLost, for a delete and for an update.
func testDeleteTwice(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	send(t, q, "once", nil)
	d := receiveOne(t, q, long)
	require.NoError(t, q.Delete(ctx, d))
	assertRefused(t, q.Delete(ctx, d), b.GoneReceipt, b)
	assertRefused(t, q.SetVisibility(ctx, d, 0), b.GoneReceipt, b)
	assertDepth(t, q, b, 0, "deleted")
}

// testForeignDelivery checks that a queue refuses a delivery another queue
// returned, touching neither message: a receipt is only good on its own
// queue. Passing it is a caller's mistake, not a lost ownership.
func testForeignDelivery(t *testing.T, h Harness) {
	b, q, other := h.Behaviour(), h.NewQueue(t), h.NewQueue(t)
	ctx := context.Background()
	mine := send(t, q, "mine", nil)
	send(t, other, "theirs", nil)
	theirs := receiveOne(t, other, long)

	err := q.Delete(ctx, theirs)
	require.Error(t, err)
	assert.NotErrorIs(t, err, azdispatch.ErrOwnershipLost, "a foreign delivery is not a stale receipt")
	assert.Error(t, q.SetVisibility(ctx, theirs, 0))

	require.NoError(t, other.Delete(ctx, theirs), "its own queue still takes it")
	d := receiveOne(t, q, long)
	assert.Equal(t, mine, d.ID)
	assert.EqualValues(t, 1, d.DequeueCount, "untouched")
	assertDepth(t, other, b, 0, "deleted through its own queue")
}
