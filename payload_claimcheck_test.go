package azdispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// collect is a handler that records string bodies.
type collect struct {
	mu     sync.Mutex
	bodies map[string]int
	batch  int // calls that carried a BatchID
}

func (c *collect) handle(_ context.Context, m *Message[string]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bodies == nil {
		c.bodies = map[string]int{}
	}
	c.bodies[m.Body]++
	if m.BatchID != "" {
		c.batch++
	}
	return nil
}

func (c *collect) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.bodies {
		n += v
	}
	return n
}

// largestFitting returns the most repetitions of unit whose encoding fits in
// a queue message of MaxMessageSize bytes.
func largestFitting(t testing.TB, codec Codec, unit string) int {
	t.Helper()
	lo, hi := 0, MaxMessageSize
	for lo < hi {
		mid := (lo + hi + 1) / 2
		text, err := codec.Encode(strings.Repeat(unit, mid))
		require.NoError(t, err)
		if len(text) <= MaxMessageSize {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// At the 64 KiB boundary, under every codec and for every kind of text: the
// largest body that fits goes on the queue as it is, one unit more is
// offloaded, and the handler gets both bodies exactly.
func TestClaimCheckAtThe64KiBBoundaryUnderEveryCodec(t *testing.T) {
	t.Parallel()
	codecs := map[string]Codec{"json": JSON(), "base64-json": Base64(JSON()), "raw": Raw(), "base64-raw": Base64(Raw())}
	units := map[string]string{"ascii": "a", "multibyte": "é𝄞", "xml-special": `<&>"'`}
	for cname, codec := range codecs {
		t.Run(cname, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			q := testQueue(t)
			p, err := NewPublisher[string](q, &PublisherOptions{Codec: codec})
			require.NoError(t, err)
			want := map[string]int{}
			for uname, unit := range units {
				k := largestFitting(t, codec, unit)
				for _, body := range []string{strings.Repeat(unit, k), strings.Repeat(unit, k+1)} {
					counted, tx := CountTransactions(ctx)
					_, err := p.Send(counted, body)
					require.NoError(t, err, "%s: never MessageTooLarge from the service", uname)
					text, _ := codec.Encode(body)
					offloaded := tx().BlobWrite > 0
					assert.Equal(t, len(text) > MaxMessageSize, offloaded, "%s at %d encoded bytes", uname, len(text))
					want[body]++
				}
			}
			var c collect
			cfg := quick()
			cfg.Codec = codec
			l, err := NewListener(q, c.handle, cfg)
			require.NoError(t, err)
			stop := started(t, l)
			waitFor(t, "every message handled", func() bool { return l.State().Succeeded == int64(len(want)) })
			require.NoError(t, stop())
			assertSameBodies(t, codec, want, c.bodies)
			assert.Zero(t, c.batch)
			s := l.State()
			assertSettled(t, s)
			assert.Equal(t, int64(len(units)), s.Transactions.BlobRead, "one read per offloaded message")
			assert.Equal(t, int64(len(units)), s.Transactions.BlobDelete, "and its blob deleted")
		})
	}
}

// assertSameBodies checks that each body sent arrived once, unchanged. One
// emulator fault is tolerated, and logged: under load Azurite sometimes
// decodes a multibyte character that a request chunk boundary splits as
// U+FFFD per byte, which only a message sent inline can
// meet; offloaded bodies travel as gzip and never do.
func assertSameBodies(t *testing.T, codec Codec, want, got map[string]int) {
	t.Helper()
	var mangled []string
	for body := range got {
		if want[body] == 0 {
			mangled = append(mangled, body)
		}
	}
	for body, n := range want {
		if got[body] == n {
			continue
		}
		text, _ := codec.Encode(body)
		if len(text) <= MaxMessageSize && len(mangled) > 0 && strings.Contains(mangled[0], "\uFFFD") && !strings.Contains(body, "\uFFFD") {
			t.Logf("emulator fault: an inline body of %d encoded bytes arrived with %d characters replaced by U+FFFD", len(text), strings.Count(mangled[0], "\uFFFD"))
			mangled = mangled[1:]
			continue
		}
		t.Errorf("a body of %d encoded bytes arrived %d times, not %d", len(text), got[body], n)
	}
	for _, body := range mangled {
		t.Errorf("a body of %d bytes arrived that was not sent", len(body))
	}
}

// randomText is n bytes of text that does not compress.
func randomText(t testing.TB, n int) string {
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func TestClaimCheckOneMiBRoundTripsWithDefaultConfig(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	body := randomText(t, 1<<20)
	p, err := NewPublisher[string](q, nil)
	require.NoError(t, err)
	_, err = p.Send(context.Background(), body)
	require.NoError(t, err)

	got := make(chan string, 1)
	l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
		got <- m.Body
		return nil
	}, nil)
	require.NoError(t, err)
	stop := started(t, l)
	select {
	case b := <-got:
		assert.Equal(t, body, b)
	case <-time.After(time.Minute):
		t.Fatal("not handled")
	}
	waitFor(t, "deleted", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	tx := l.State().Transactions
	assert.Equal(t, int64(1), tx.BlobRead)
	assert.Equal(t, int64(1), tx.BlobDelete)
}

// A queue with no blob service behind it cannot offload: the publisher says
// so before any request, and never sends what the service would refuse.
// queueWithoutBlobs returns a new queue in the test emulator, opened
// through an account whose blob service is unknown: it has no payload store.
func queueWithoutBlobs(t testing.TB) *Queue {
	t.Helper()
	endpoint := ""
	for _, part := range strings.Split(connectionString(t), ";") {
		if v, ok := strings.CutPrefix(part, "QueueEndpoint="); ok {
			endpoint = v
		}
	}
	require.NotEmpty(t, endpoint)
	a, err := NewAccountWithSharedKey(endpoint, "devstoreaccount1", emulatorKey, nil)
	require.NoError(t, err)
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	require.Nil(t, q.PayloadStore())
	return q
}

func TestClaimCheckWithoutAPayloadStoreFailsBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	q := queueWithoutBlobs(t)
	a := q.account
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)

	_, err = p.Send(context.Background(), strings.Repeat("a", MaxMessageSize+1))
	assert.ErrorIs(t, err, ErrMessageTooLarge)
	assert.ErrorIs(t, err, ErrNoBlobService)
	_, err = p.Send(context.Background(), wire.PointerMagic+"{}")
	assert.ErrorIs(t, err, ErrNoBlobService, "text that would pass for a pointer cannot go as it is")
	_, err = p.SendBatch(context.Background(), []string{"a"}, nil)
	assert.ErrorIs(t, err, ErrNoBlobService)
	_, err = p.SendBatch(context.Background(), nil, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.Zero(t, a.Transactions().Total())

	// A listener there poisons a pointer, with the reason, touching no blob.
	ptr := (&wire.Pointer{Kind: wire.KindSingle, Blob: strings.Repeat("a", 32), Size: 10, SHA256: strings.Repeat("b", 64), Items: 1}).Encode()
	_, err = q.Send(context.Background(), ptr, nil)
	require.NoError(t, err)
	l, err := NewListener(q, func(context.Context, *Message[string]) error { return nil }, quick())
	require.NoError(t, err)
	env := poisonedOnce(t, q, l)
	assert.Contains(t, env.Reason, ErrNoBlobService.Error())
	assert.Equal(t, ptr, env.Body)
	assert.Zero(t, a.Transactions().Blob())
}

// Raw text that starts like a pointer is offloaded, so that no listener
// mistakes a user's message for one.
func TestClaimCheckOffloadsTextThatLooksLikeAPointer(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	body := wire.PointerMagic + `{"kind":"batch"}`
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	_, err = p.Send(context.Background(), body)
	require.NoError(t, err)
	var c collect
	cfg := quick()
	cfg.Codec = Raw()
	l, err := NewListener(q, c.handle, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.Equal(t, map[string]int{body: 1}, c.bodies)
}

// A message too large for a poison envelope (sent by another producer right
// at the service limit) is poisoned with its body in a blob, and Requeue
// brings the original text back.
func TestPoisonOffloadsABodyTooLargeForAnEnvelope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	body := strings.Repeat("z", serviceMessageLimit-100)
	_, err := q.Send(ctx, body, nil)
	require.NoError(t, err)

	var c collect
	var broken atomic.Bool
	broken.Store(true)
	cfg := quick()
	cfg.Codec = Raw()
	l, err := NewListener(q, func(ctx context.Context, m *Message[string]) error {
		if broken.Load() {
			return Permanent(errors.New("downstream refuses it"))
		}
		return c.handle(ctx, m)
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "poisoned", func() bool { return l.State().Poisoned == 1 })
	s := l.State()
	assert.Zero(t, s.PoisonErrors)
	assert.Positive(t, s.Transactions.BlobWrite, "the body went to a blob")

	broken.Store(false)
	res, err := Requeue(ctx, q.PoisonQueue(), q, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Moved)
	waitFor(t, "handled after requeue", func() bool { return c.count() == 1 })
	waitFor(t, "deleted", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	assert.Equal(t, map[string]int{body: 1}, c.bodies)
	assert.Equal(t, int64(1), l.State().Transactions.BlobDelete, "its blob is deleted once handled")
}
