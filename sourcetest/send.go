package sourcetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// roundTripTexts are texts that must come back byte for byte: the XML the
// service speaks escapes some of them on the wire, and multibyte text must
// not be re-encoded.
var roundTripTexts = []string{
	"plain",
	"",
	`<order id="1" note='a&b'>x > y</order>`,
	`]]> ends a CDATA section; &amp; is not an entity here`,
	`{"n":1,"s":"<&>\"'"}`,
	"héllo wörld · 日本語 · emoji 🚀",
	"line one\nline two\r\n\ttabbed and trailing  ",
}

// testRoundTrip sends texts, receives them and deletes them: the ID is the
// one the send returned, the text is as sent, and the times are plausible.
func testRoundTrip(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	before := time.Now()
	sent := map[string]string{} // ID → text
	for _, text := range roundTripTexts {
		sent[send(t, q, text, nil)] = text
	}
	after := time.Now()
	require.Len(t, sent, len(roundTripTexts), "every send returns a new ID")

	got := receiveN(t, q, len(sent), long)
	received := time.Now()
	// The service's times are whole seconds, and its clock is its own.
	slack := b.ClockSkew + time.Second
	for _, d := range got {
		text, ok := sent[d.ID]
		require.True(t, ok, "received ID %q was never sent", d.ID)
		assert.Equal(t, text, d.Text, "text of %s", d.ID)
		assert.EqualValues(t, 1, d.DequeueCount, "first delivery")
		assert.NotEmpty(t, d.Queue, "a delivery names the queue it came from")
		assert.WithinRange(t, d.InsertedAt, before.Add(-slack), after.Add(slack), "InsertedAt")
		assertNear(t, d.InsertedAt.Add(7*24*time.Hour), d.ExpiresAt, time.Second, "ExpiresAt: the default TTL is 7 days")
		assert.WithinRange(t, d.NextVisibleAt, before.Add(long-slack), received.Add(long+slack), "NextVisibleAt: the receive's visibility from now")
		for _, at := range []time.Time{d.InsertedAt, d.ExpiresAt, d.NextVisibleAt} {
			assert.Zero(t, at.Nanosecond(), "the service reports times to the whole second: %v", at)
		}
		require.NoError(t, q.Delete(ctx, d))
	}
	assertDepth(t, q, b, 0, "every message deleted")
}

// testReceiveArguments checks that a receive of no messages or of more than
// 32, or with no visibility timeout, fails and takes nothing.
func testReceiveArguments(t *testing.T, h Harness) {
	q := h.NewQueue(t)
	ctx := context.Background()
	id := send(t, q, "still there", nil)
	for _, max := range []int{0, -1, azdispatch.MaxBatch + 1} {
		_, err := q.Receive(ctx, max, long)
		assert.Error(t, err, "receive of %d messages", max)
	}
	_, err := q.Receive(ctx, 1, 0)
	assert.Error(t, err, "receive with visibility 0")
	d := receiveOne(t, q, long)
	assert.Equal(t, id, d.ID)
	assert.EqualValues(t, 1, d.DequeueCount, "the refused receives took nothing")
}

// testReceiveEachOnce sends more than a batch and receives it all: no
// receive returns more than it asked for, 32 may be asked for, and while
// they are hidden no message comes twice.
func testReceiveEachOnce(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	const n = 40
	sent := map[string]bool{}
	for i := range n {
		sent[send(t, q, strings.Repeat("x", i+1), nil)] = true
	}

	first, err := q.Receive(ctx, 5, long)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(first), 5, "a receive of 5")
	full, err := q.Receive(ctx, azdispatch.MaxBatch, long)
	require.NoError(t, err, "a receive of 32 is allowed")
	assert.LessOrEqual(t, len(full), azdispatch.MaxBatch)
	got := make([]*azdispatch.Delivery, 0, n)
	got = append(append(got, first...), full...)
	got = append(got, receiveN(t, q, n-len(got), long)...)

	seen := map[string]bool{}
	for _, d := range got {
		assert.False(t, seen[d.ID], "message %s received twice while hidden", d.ID)
		seen[d.ID] = true
		assert.True(t, sent[d.ID], "received ID %q was never sent", d.ID)
	}
	assert.Len(t, seen, n, "every message received")
	assertNoneVisible(t, q, b, "all are hidden")
}

// testSizeLimit sends the largest text the service takes, and one byte
// more, which azdispatch refuses before any request: the service and
// Azurite would refuse it with different answers (see the package
// documentation).
func testSizeLimit(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	ctx := context.Background()
	const limit = 64 * 1024
	text := strings.Repeat("a", limit)
	id := send(t, q, text, nil)

	// A queue that counts its requests (as azdispatch.Queue and
	// memqueue.Queue do) shows that what azdispatch refuses costs none.
	transactions := azdispatch.CapabilitiesOf(q).Transactions
	counts := transactions != nil
	var sends int64
	if counts {
		sends = transactions().Send
	}
	_, err := q.Send(ctx, text+"b", nil)
	var tooLarge *azdispatch.MessageTooLargeError
	if assert.ErrorAs(t, err, &tooLarge) {
		assert.Equal(t, limit+1, tooLarge.Size)
		assert.Equal(t, limit, tooLarge.Limit)
	}
	assert.ErrorIs(t, err, azdispatch.ErrMessageTooLarge)
	if counts {
		assert.Equal(t, sends, transactions().Send, "refused before any request")
	}

	d := receiveOne(t, q, long)
	assert.Equal(t, id, d.ID)
	assert.True(t, d.Text == text, "64 KiB text came back as %d bytes", len(d.Text))
	assertDepth(t, q, b, 1, "only the text within the limit was sent")
}

// testInvalidText checks that text the service's XML cannot carry (a
// control character XML forbids, invalid UTF-8) is refused, not silently
// changed on its way.
func testInvalidText(t *testing.T, h Harness) {
	b, q := h.Behaviour(), h.NewQueue(t)
	for _, text := range []string{"nul\x00byte", "escape\x1b[0m", "bad utf-8 \xff"} {
		_, err := q.Send(context.Background(), text, nil)
		assert.ErrorIs(t, err, azdispatch.ErrInvalidText, "%q", text)
	}
	assertDepth(t, q, b, 0, "nothing was sent")
}
