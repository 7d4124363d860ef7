package azdispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/payload"
	"github.com/azdispatch/azdispatch/internal/wire"
)

// poisonAll runs a listener on q until it has poisoned n messages, failing
// the test if the handler is ever called, and returns its state and the
// envelopes.
func poisonAll(t *testing.T, q *Queue, n int, cfg *ListenerOptions) (State, []*PoisonEnvelope) {
	t.Helper()
	l, err := NewListener(q, func(_ context.Context, m *Message[job]) error {
		t.Errorf("handler called for %+v", m)
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "all poisoned", func() bool { return l.State().Poisoned == int64(n) })
	require.NoError(t, stop())
	s := l.State()
	assertSettled(t, s)
	return s, poisonEnvelopes(t, q)
}

// Every tampered pointer ends in the poison queue with its reason, and the
// listener makes no blob request at all for it.
func TestTamperedPointersArePoisonedWithoutAnyBlobRequest(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	sent := sendBatch(t, q, 3, nil) // a genuine pointer to tamper with
	batch, err := q.Receive(context.Background(), 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	genuine := batch[0].Text
	require.NoError(t, q.Delete(context.Background(), batch[0]))
	require.Contains(t, genuine, sent.BatchID)
	sum := genuine[strings.Index(genuine, `"sha256":"`)+10:][:64]

	tampered := []string{
		strings.Replace(genuine, `"kind"`, `"container":"elsewhere","kind"`, 1),
		strings.Replace(genuine, sent.BatchID, "../"+sent.BatchID[3:], 1),
		strings.Replace(genuine, sent.BatchID, "..%2f"+sent.BatchID[5:], 1),
		strings.Replace(genuine, sent.BatchID, "https://evil.example/"+sent.BatchID, 1),
		strings.Replace(genuine, sent.BatchID, "/devstoreaccount1/other/"+sent.BatchID, 1),
		strings.Replace(genuine, sum, "sha256:"+sum[7:], 1),
		strings.Replace(genuine, sum, strings.ToUpper(sum), 1),
		strings.Replace(genuine, `"items":3`, `"items":-3`, 1),
		wire.PointerMagic + "not json",
	}
	for _, text := range tampered {
		_, err := q.Send(context.Background(), text, nil)
		require.NoError(t, err)
	}
	s, envs := poisonAll(t, q, len(tampered), quick())
	assert.Zero(t, s.Transactions.Blob(), "no blob request: %+v", s.Transactions)
	require.Len(t, envs, len(tampered))
	var bodies []string
	for _, e := range envs {
		assert.Contains(t, e.Reason, ErrInvalidPointer.Error())
		bodies = append(bodies, e.Body)
	}
	assert.ElementsMatch(t, tampered, bodies, "each envelope keeps the pointer as it came")
}

// putRaw stores data as a payload blob with valid metadata, as a publisher
// would, and returns its pointer: for payloads no publisher would write.
func putRaw(t testing.TB, q *Queue, kind string, items int, data []byte) *wire.Pointer {
	t.Helper()
	p, err := q.PayloadStore().put(context.Background(), payload.Meta{Kind: kind, Queue: q.Name(), Created: time.Now(), Expires: time.Now().Add(time.Hour), Items: items}, data)
	require.NoError(t, err)
	return p
}

// A missing or corrupt blob is poisoned with the reason, and never deleted:
// a corrupt one is kept, marked, for whoever looks into it.
func TestMissingCorruptAndOversizedPayloadsArePoisonedAndKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	store := q.PayloadStore()
	good := payload.NewWriter(payload.Limits(defaultLimits(t)))
	require.NoError(t, good.Add(`{"n":1}`))
	data, err := good.Finish()
	require.NoError(t, err)

	missing := putRaw(t, q, payload.KindSingle, 1, data)
	require.NoError(t, store.remove(ctx, missing.Blob))
	wrongHash := putRaw(t, q, payload.KindSingle, 1, data)
	wrongHash.SHA256 = strings.Repeat("0", 64)
	wrongSize := putRaw(t, q, payload.KindSingle, 1, data)
	wrongSize.Size--
	notGzip := putRaw(t, q, payload.KindBatch, 1, []byte("plain text, not gzip"))
	wrongCount := putRaw(t, q, payload.KindBatch, 2, data)
	bomb := putRaw(t, q, payload.KindBatch, 1, compressedItem(t, 16<<20))
	require.Less(t, bomb.Size, int64(64<<10), "16 MiB of zeros in a few KiB")

	reasons := map[string]*wire.Pointer{
		ErrPayloadMissing.Error():  missing,
		"SHA-256":                  wrongHash,
		"bytes, the pointer says":  wrongSize,
		"gzip":                     notGzip,
		"items, the pointer says":  wrongCount,
		ErrPayloadTooLarge.Error(): bomb,
	}
	byBody := map[string]string{}
	for reason, p := range reasons {
		_, err := q.Send(ctx, p.Encode(), nil)
		require.NoError(t, err)
		byBody[p.Encode()] = reason
	}
	cfg := quick()
	cfg.Payloads.Limits = PayloadLimits{MaxExpandedSize: 1 << 20}
	s, envs := poisonAll(t, q, len(reasons), cfg)
	require.Len(t, envs, len(reasons))
	for _, e := range envs {
		assert.Contains(t, e.Reason, byBody[e.Body])
	}
	assert.Zero(t, s.Transactions.BlobDelete, "nothing deleted")
	for reason, p := range reasons {
		meta, _, err := store.properties(ctx, p.Blob)
		if p == missing {
			assert.ErrorIs(t, err, ErrPayloadMissing)
			continue
		}
		require.NoError(t, err, reason)
		assert.False(t, meta.Poisoned.IsZero(), "%s: kept and marked", reason)
	}
}

// A batch poisoned whole (here: delivered more often than MaxDequeueCount)
// keeps its blob, which Sweep leaves alone; Requeue brings the batch back
// and it completes.
func TestPoisonedBatchKeepsItsBlobAndCanBeRequeued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sent := sendBatch(t, q, 5, &PublisherOptions{TTL: 2 * time.Second})
	got, err := q.Receive(ctx, 1, time.Second) // a receiver that died
	require.NoError(t, err)
	require.Len(t, got, 1)

	cfg := quick()
	cfg.MaxDequeueCount = 1
	c := newTally()
	l, err := NewListener(q, c.handler(func(context.Context, *Message[job]) error { return nil }), cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "batch poisoned", func() bool { return l.State().Poisoned == 1 })
	assert.Zero(t, c.succeeded(), "no item ran")
	store := l.opts.Payloads.Store
	meta, _, err := store.properties(ctx, sent.BatchID)
	require.NoError(t, err)
	assert.False(t, meta.Poisoned.IsZero(), "the blob is marked")

	time.Sleep(3 * time.Second) // past the original message's expiry
	res, err := Sweep(ctx, store, &SweepOptions{Grace: time.Millisecond, Queue: q.Name()})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Poisoned)
	assert.Zero(t, res.Deleted)

	moved, err := Requeue(ctx, q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, moved.Moved)
	waitFor(t, "requeued batch done", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	c.assertEachSucceededOnce(t, 5, 0)
	assert.True(t, blobGone(t, store, sent.BatchID))
}

// compressedItem is a payload of one item of n repeated bytes (up to the
// default MaxItemSize), which compresses to almost nothing: a decompression
// bomb for a reader whose limits are lower than n.
func compressedItem(t testing.TB, n int) []byte {
	t.Helper()
	w := payload.NewWriter(payload.Limits(defaultLimits(t)))
	require.NoError(t, w.Add(strings.Repeat("a", n)))
	data, err := w.Finish()
	require.NoError(t, err)
	return data
}
