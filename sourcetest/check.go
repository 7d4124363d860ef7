package sourcetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// Times the suite uses. A short visibility, delay or TTL is one second (the
// service's unit) and Advance moves two, so that whole-second rounding never
// decides a test; a long visibility outlasts any subtest on real time.
const (
	short   = time.Second
	advance = 2 * time.Second
	long    = 30 * time.Second
	// patience bounds every wait for something to happen: generous, since
	// a loaded machine or the real service may be slow, and never reached
	// when the backend is right.
	patience = 30 * time.Second
	// poll is the pause after a receive that found nothing.
	poll = 10 * time.Millisecond
)

// send puts text on q and returns its ID.
func send(t *testing.T, q azdispatch.Shard, text string, opts *azdispatch.SendOptions) string {
	t.Helper()
	id, err := q.Send(context.Background(), text, opts)
	require.NoError(t, err)
	require.NotEmpty(t, id, "a send returns the new message's ID")
	return id
}

// receiveN receives from q, hiding each message for visibility, until it
// holds n messages, failing if any comes twice or the wait runs out. One
// receive need not return everything visible (a sharded queue reads one
// shard; the service promises nothing), so it keeps asking.
func receiveN(t *testing.T, q azdispatch.Source, n int, visibility time.Duration) []*azdispatch.Delivery {
	t.Helper()
	var got []*azdispatch.Delivery
	seen := map[string]bool{}
	deadline := time.Now().Add(patience)
	for len(got) < n {
		want := min(n-len(got), azdispatch.MaxBatch)
		batch, err := q.Receive(context.Background(), want, visibility)
		require.NoError(t, err)
		require.LessOrEqual(t, len(batch), want, "a receive returns at most max messages")
		for _, d := range batch {
			require.False(t, seen[d.ID], "message %s received twice while hidden", d.ID)
			seen[d.ID] = true
			got = append(got, d)
		}
		if len(batch) == 0 {
			require.True(t, time.Now().Before(deadline), "received %d of %d messages in %v", len(got), n, patience)
			time.Sleep(poll)
		}
	}
	return got
}

// receiveOne receives the one message expected on q.
func receiveOne(t *testing.T, q azdispatch.Source, visibility time.Duration) *azdispatch.Delivery {
	t.Helper()
	return receiveN(t, q, 1, visibility)[0]
}

// assertNoneVisible checks that b.Sweep receives in a row find nothing on q.
// A message they find is hidden for long, which the failing test does not
// mind.
func assertNoneVisible(t *testing.T, q azdispatch.Shard, b Behaviour, why string) {
	t.Helper()
	for range b.sweep() {
		batch, err := q.Receive(context.Background(), azdispatch.MaxBatch, long)
		require.NoError(t, err)
		if !assert.Empty(t, batch, "%s: %s", b.Name, why) {
			return
		}
	}
}

// assertHiddenFor checks, as assertNoneVisible does, that q shows nothing
// while a message is hidden for hidden from since on. On real time a
// backend that stalls (Azurite stops answering while it collects deleted
// messages) may answer after the message is due again: a message found
// then proves nothing, and the subtest is skipped as inconclusive rather
// than failed.
func assertHiddenFor(t *testing.T, q azdispatch.Shard, b Behaviour, since time.Time, hidden time.Duration, why string) {
	t.Helper()
	for range b.sweep() {
		batch, err := q.Receive(context.Background(), azdispatch.MaxBatch, long)
		require.NoError(t, err)
		if len(batch) == 0 {
			continue
		}
		if took := time.Since(since); took >= hidden {
			t.Skipf("%s: inconclusive: the check took %v, and the message was hidden for %v only", b.Name, took, hidden)
		}
		assert.Empty(t, batch, "%s: %s", b.Name, why)
		return
	}
}

// assertDepth checks q's depth: at once if the backend's count is exact,
// else within patience.
func assertDepth(t *testing.T, q azdispatch.Shard, b Behaviour, want int, why string) {
	t.Helper()
	read := func() int {
		n, err := q.Depth(context.Background())
		require.NoError(t, err)
		return n
	}
	if b.ExactDepth {
		assert.Equal(t, want, read(), "%s: %s", b.Name, why)
		return
	}
	assert.Eventually(t, func() bool { return read() == want }, patience, 100*time.Millisecond, "%s: %s", b.Name, why)
}

// assertRefused checks that err is a stale or gone receipt refused as the
// backend answers it, and that it matches ErrOwnershipLost, on which the
// Listener relies whatever the status.
func assertRefused(t *testing.T, err error, want Answer, b Behaviour) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, azdispatch.ErrOwnershipLost, "%s: %v", b.Name, err)
	var se *azdispatch.StorageError
	if assert.ErrorAs(t, err, &se, "%s: %v", b.Name, err) {
		assert.Equal(t, want, Answer{se.StatusCode, se.Code}, "%s: %v", b.Name, err)
	}
}

// assertNear checks that got is within slack of want.
func assertNear(t *testing.T, want, got time.Time, slack time.Duration, what string) {
	t.Helper()
	assert.WithinDuration(t, want, got, slack, what)
}

// sameReceipt reports whether a and b hold the same Receipt value. A Source
// may keep one receipt value and change what it holds (a ShardedQueue
// does, so that renewals never change d.Receipt under a poison move); a copy
// of a delivery then follows the updates and cannot show a stale receipt.
// Receipts that cannot be compared count as different.
func sameReceipt(a, b *azdispatch.Delivery) (same bool) {
	defer func() { _ = recover() }()
	return a.Receipt == b.Receipt
}
