package azdispatch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// A publisher and a listener, each holding only its least privilege (see
// publisherGrants and listenerGrants), do all their work: the publisher
// creates the queue and the payload container and sends a message, one
// offloaded to a blob and a batch; the listener handles them all, releases
// a failed one for a retry, reads the depth, poisons the offloaded one
// (creating the poison queue and marking the blob) and deletes the batch's
// blob, without one request refused.
func TestPermissionsLeastPrivilegeRoundTrip(t *testing.T) {
	t.Parallel()
	needStorage(t)
	ctx := t.Context()
	name, container := uniqueName(t), uniqueName(t)
	open := func(g roleGrants) (*Queue, *PayloadStore) {
		queueToken, blobToken := g.apply(t, nil)
		a, err := NewAccountWithSAS(emulatorFor(t).QueueEndpoint()+"?"+queueToken,
			&AccountOptions{BlobServiceURL: emulatorFor(t).BlobEndpoint() + "?" + blobToken})
		require.NoError(t, err)
		q, err := a.Queue(name)
		require.NoError(t, err)
		store, err := a.PayloadStore(container)
		require.NoError(t, err)
		return q, store
	}

	pq, pstore := open(publisherGrants)
	p, err := NewPublisher[string](pq, &PublisherOptions{Payloads: pstore})
	require.NoError(t, err)
	big := "poison me:" + strings.Repeat("x", 70<<10)
	for _, body := range []string{"single", "flaky", big} {
		_, err := p.Send(ctx, body)
		require.NoError(t, err)
	}
	_, err = p.SendBatch(ctx, []string{"item 0", "item 1", "item 2"}, nil)
	require.NoError(t, err)

	var mu sync.Mutex
	calls := map[string]int{}
	handle := func(_ context.Context, m *Message[string]) error {
		mu.Lock()
		calls[m.Body]++
		n := calls[m.Body]
		mu.Unlock()
		switch {
		case strings.HasPrefix(m.Body, "poison me:"):
			return Permanent(errors.New("refused"))
		case m.Body == "flaky" && n == 1:
			return errors.New("fails once")
		}
		return nil
	}
	var logs syncBuffer
	lq, lstore := open(listenerGrants)
	l, err := NewListener(lq, handle, &ListenerOptions{
		Scaling: ScalingOptions{
			BatchSize: 1, // every receive is full, so each is followed by a depth read
			Idle:      ExponentialIdle(0, 200*time.Millisecond),
		},
		Payloads: PayloadOptions{
			Store: lstore,
		},
		Retry:  func(int64) time.Duration { return time.Second },
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "every message settled", func() bool {
		s := l.State()
		return s.Succeeded == 3 && s.Poisoned == 1 && s.ItemsSucceeded == 3
	})
	require.NoError(t, stop())

	s := l.State()
	assert.EqualValues(t, 1, s.Retried, "the flaky message was released once (Update Message)")
	assert.False(t, s.DepthAt.IsZero(), "the depth was read (Get Queue Metadata)")
	assert.Zero(t, s.ReceiveErrors)
	assert.Zero(t, s.PoisonErrors)
	assert.Zero(t, s.Lost)
	// As a StorageError says it ("…: 403 AuthorizationPermissionMismatch"):
	// a bare "403" may stand in a random queue name or message ID.
	assert.NotRegexp(t, `: 403 `, logs.String(), "no request was refused")
	mu.Lock()
	assert.Equal(t, 2, calls["flaky"])
	assert.Equal(t, 1, calls[big])
	mu.Unlock()

	// What is left, seen with the account key: the envelope in the poison
	// queue points at the big message's blob, which is marked poisoned and
	// is the only blob left; the queue is empty.
	admin := testAccount(t, nil)
	aq, err := admin.Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 0, depth(t, aq))
	ds, err := aq.PoisonQueue().Receive(ctx, MaxBatch, time.Minute)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	env, err := ParsePoison(ds[0].Text)
	require.NoError(t, err)
	msg, err := wire.Parse(env.Body, wire.Limits{})
	ptr := msg.Pointer
	require.NoError(t, err)
	astore, err := admin.PayloadStore(container)
	require.NoError(t, err)
	meta, _, err := astore.properties(ctx, ptr.Blob)
	require.NoError(t, err)
	assert.False(t, meta.Poisoned.IsZero(), "the poisoned message's blob is marked (Set Blob Metadata)")
	assert.Equal(t, []string{ptr.Blob}, listBlobs(t, astore), "the batch's blob was deleted after success (Delete Blob)")
}

// syncBuffer is a bytes.Buffer safe for the listener's goroutines to log to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
