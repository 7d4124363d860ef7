package azdispatch

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// slowBlobTransport serves payload blob downloads through a slow link: 32 KiB
// every 25 ms (about 1.3 MB/s). While stall is set, a download sends 10 KiB
// and then nothing more.
type slowBlobTransport struct {
	next  policy.Transporter
	stall atomic.Bool
}

func (s *slowBlobTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := s.next.Do(req)
	if err != nil || req.Method != http.MethodGet || !strings.Contains(req.URL.Path, DefaultPayloadContainer) || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	resp.Body = &slowBody{ctx: req.Context(), body: resp.Body, stall: s.stall.Load()}
	return resp, nil
}

type slowBody struct {
	ctx   context.Context
	body  io.ReadCloser
	stall bool
	sent  int
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.stall && b.sent >= 10<<10 {
		<-b.ctx.Done()
		return 0, b.ctx.Err()
	}
	select {
	case <-time.After(25 * time.Millisecond):
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
	n, err := b.body.Read(p[:min(len(p), 32<<10)])
	b.sent += n
	return n, err
}

func (b *slowBody) Close() error { return b.body.Close() }

// sendRaw sends body to q as it is; a large one is offloaded to a blob.
func sendRaw(t *testing.T, q *Queue, body string) {
	t.Helper()
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	_, err = p.Send(context.Background(), body)
	require.NoError(t, err)
}

// A payload that takes longer to download than the account's per-try
// timeout is read all the same: a blob read is bounded by its progress. A
// download that stops making progress is given up after a window and the
// message retried; once the link recovers it is handled.
func TestBlobReadIsBoundedByProgressNotByTheTryTimeout(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	raw := make([]byte, 1536<<10)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	body := base64.StdEncoding.EncodeToString(raw) // 2 MiB that gzip cannot shrink much
	sendRaw(t, q, body)

	slow := &slowBlobTransport{next: newHTTPClient()}
	slow.stall.Store(true)
	slowAccount := testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: slow,
		Retry:     policy.RetryOptions{TryTimeout: 500 * time.Millisecond, MaxRetries: 1, RetryDelay: time.Millisecond},
	}}})
	lq, err := slowAccount.Queue(q.Name())
	require.NoError(t, err)
	store, err := slowAccount.PayloadStore("")
	require.NoError(t, err)
	store.stall = payload.Stall{Window: 500 * time.Millisecond, MinBytes: 64 << 10}
	var got atomic.Pointer[string]
	cfg := quick()
	cfg.Payloads.Store = store
	cfg.Codec = Raw()
	l, err := NewListener(lq, func(_ context.Context, m *Message[string]) error {
		got.Store(&m.Body)
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)

	waitFor(t, "a stalled download retried", func() bool { return l.State().Retried >= 1 })
	assert.ErrorIs(t, l.State().LastError, payload.ErrStalled)
	slow.stall.Store(false)
	waitFor(t, "handled over the slow link", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	require.NotNil(t, got.Load())
	assert.Equal(t, body, *got.Load(), "byte for byte, though each download took longer than the 500 ms try timeout")
}

// cutBlobTransport ends the body of the first payload blob download after
// half its bytes, as a connection that breaks mid-transfer does; the
// response's Content-Length stays what the service said.
type cutBlobTransport struct {
	next policy.Transporter
	cut  atomic.Bool
}

func (c *cutBlobTransport) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || req.Method != http.MethodGet || !strings.Contains(req.URL.Path, DefaultPayloadContainer) ||
		resp.StatusCode != http.StatusOK || !c.cut.CompareAndSwap(false, true) {
		return resp, err
	}
	resp.Body = &cutBody{body: resp.Body, left: resp.ContentLength / 2}
	return resp, nil
}

type cutBody struct {
	body io.ReadCloser
	left int64
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.body.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	return n, err
}

func (b *cutBody) Close() error { return b.body.Close() }

// A download whose connection breaks mid-body is a failed request, not a
// corrupt payload: the message is retried and then handled, never
// poisoned. (A short read was once taken for a blob shorter than its
// pointer, and poisoned at once.)
func TestACutDownloadIsRetriedNotPoisoned(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	body := strings.Repeat("a large body that is offloaded to a blob; ", 4<<10)
	sendRaw(t, q, body)

	cut := &cutBlobTransport{next: newHTTPClient()}
	account := testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: cut,
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}}})
	lq, err := account.Queue(q.Name())
	require.NoError(t, err)
	cfg := quick()
	cfg.Codec = Raw()
	cfg.Retry = func(int64) time.Duration { return 0 }
	var got atomic.Pointer[string]
	l, err := NewListener(lq, func(_ context.Context, m *Message[string]) error {
		got.Store(&m.Body)
		return nil
	}, cfg)
	require.NoError(t, err)
	stop := started(t, l)
	waitFor(t, "handled", func() bool { return l.State().Succeeded == 1 })
	require.NoError(t, stop())
	s := l.State()
	assert.True(t, cut.cut.Load(), "the first download was cut")
	assert.Zero(t, s.Poisoned, "a cut connection is no reason to poison")
	assert.EqualValues(t, 1, s.Retried, "the cut download was retried")
	require.NotNil(t, got.Load())
	assert.Equal(t, body, *got.Load())
}
