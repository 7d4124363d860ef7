package azdispatch

import (
	"context"
	"errors"
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
	"github.com/azdispatch/azdispatch/internal/records"
)

// lostAnswer passes requests on to the emulator, and for those lose picks
// that succeeded (while its count lasts) throws the answer away after the
// service has acted on it: the connection dropped on the way back. The SDK
// then retries a request that has taken effect, as it would in production.
type lostAnswer struct {
	next  policy.Transporter
	lose  func(*http.Request) bool
	left  atomic.Int32
	taken atomic.Int32 // answers thrown away
}

func (l *lostAnswer) Do(req *http.Request) (*http.Response, error) {
	resp, err := l.next.Do(req)
	if err != nil || resp.StatusCode >= 300 || !l.lose(req) || l.left.Add(-1) < 0 {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	l.taken.Add(1)
	return nil, errors.New("connection reset by peer (after the request took effect)")
}

// lostAnswerAccount opens the emulator through l, with quick SDK retries.
func lostAnswerAccount(t *testing.T, l *lostAnswer) *Account {
	t.Helper()
	l.next = newHTTPClient()
	return testAccount(t, &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: l,
		Retry:     policy.RetryOptions{MaxRetries: 3, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond},
	}}})
}

// conditionalBlobPut picks a blob upload with a condition (If-None-Match or
// If-Match): the writes that can refuse their own retry.
func conditionalBlobPut(req *http.Request) bool {
	return req.Method == http.MethodPut && req.URL.Query().Get("comp") == "" &&
		(req.Header.Get("If-None-Match") != "" || req.Header.Get("If-Match") != "") &&
		!strings.Contains(req.URL.Path, "/messages")
}

// A unique send whose key's write took effect but whose answer was lost
// is sent: the SDK's retry of the write is refused (the record exists),
// and the record carries the token this write chose, so it is known for
// its own. (It was taken for another send's key: nothing was sent, and the
// key stayed held for its whole window.)
func TestAUniqueSendWhoseKeyWriteLostItsAnswerIsSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &lostAnswer{lose: conditionalBlobPut}
	l.left.Store(1)
	name := uniqueName(t)
	createQueue(t, name)
	p := publisherThrough(t, lostAnswerAccount(t, l), name, uniqueName(t))
	_, err := p.SendWith(ctx, job{N: 1}, &SendOptions{UniqueKey: "invoice-42", UniqueFor: time.Hour})
	require.NoError(t, err)
	require.Equal(t, int32(1), l.taken.Load(), "the key's write lost its answer")
	q, err := testAccount(t, nil).Queue(name)
	require.NoError(t, err)
	assert.Equal(t, 1, depth(t, q), "sent")
	_, err = p.SendWith(ctx, job{N: 2}, &SendOptions{UniqueKey: "invoice-42", UniqueFor: time.Hour})
	assert.ErrorIs(t, err, ErrDuplicate, "and the key is held")
}

// A cancel whose record's write lost its answer recognises its own record:
// the message is cancelled, not taken for one cancelled before. (A message
// listeners hide again was answered ErrAlreadyCancelled, by its own
// record.)
func TestACancelWhoseRecordWriteLostItsAnswerIsDone(t *testing.T) {
	t.Parallel()
	r := newCancelRig(t)
	ctx := context.Background()
	s, err := r.pub.SendAfter(ctx, job{N: 1}, 10*time.Second)
	require.NoError(t, err)
	started(t, r.l)
	waitFor(t, "hidden again", func() bool { return r.l.State().Rehidden >= 1 })

	l := &lostAnswer{lose: conditionalBlobPut}
	l.left.Store(1)
	other := publisherThrough(t, lostAnswerAccount(t, l), r.q.Name(), r.store.Container())
	start := time.Now()
	require.NoError(t, other.Cancel(ctx, s.Token))
	require.Equal(t, int32(1), l.taken.Load(), "the record's write lost its answer")
	assert.Less(t, time.Since(start), pendingLimit, "not taken for another's cancel, waited for")
	waitFor(t, "found cancelled when due", func() bool { return r.l.State().Cancelled == 1 })
	assert.Zero(t, r.handled.Load())
	assert.ErrorIs(t, other.Cancel(ctx, s.Token), ErrAlreadyCancelled, "a second cancel")
}

// A batch whose blob's write lost its answer is sent: its name is random,
// and the blob found under it carries this write's token. (The send failed
// with 409 BlobAlreadyExists, for a blob it had written itself.)
func TestABatchWhoseBlobWriteLostItsAnswerIsSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &lostAnswer{lose: conditionalBlobPut}
	l.left.Store(1)
	name := uniqueName(t)
	createQueue(t, name)
	p := publisherThrough(t, lostAnswerAccount(t, l), name, uniqueName(t))
	b, err := p.SendBatch(ctx, []job{{N: 1}, {N: 2}}, nil)
	require.NoError(t, err)
	require.Equal(t, int32(1), l.taken.Load())
	assert.Equal(t, 2, b.Items)
}

// A record write of a scheduler or a listener's mark (If-None-Match, or
// If-Match) whose answer was lost is known for its own write, with the
// record's new version: not taken for another writer's.
func TestARecordWriteThatLostItsAnswerIsItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &lostAnswer{lose: conditionalBlobPut}
	a := lostAnswerAccount(t, l)
	store, err := a.PayloadStore(uniqueName(t))
	require.NoError(t, err)
	recs := store.records
	r := &records.Record{Kind: payload.KindSchedule, Value: []byte(`{"a":1}`)}
	l.left.Store(1)
	require.NoError(t, recs.Write(ctx, "rec", r), "a create whose answer was lost")
	require.Equal(t, int32(1), l.taken.Load())
	require.NotEmpty(t, r.Version)

	r.Value = []byte(`{"a":2}`)
	l.left.Store(1)
	require.NoError(t, recs.Write(ctx, "rec", r), "a replace whose answer was lost")
	require.Equal(t, int32(2), l.taken.Load())
	got, err := recs.Read(ctx, "rec")
	require.NoError(t, err)
	assert.Equal(t, `{"a":2}`, string(got.Value))
	assert.Equal(t, r.Version, got.Version, "the version the write made")

	stale := &records.Record{Kind: payload.KindSchedule, Value: []byte(`{"a":3}`), Version: `"0x1"`}
	assert.ErrorIs(t, recs.Write(ctx, "rec", stale), records.ErrChanged, "another writer's change is still refused")
}

// A cancel whose delete took effect but lost its answer, and whose retry
// found the message gone, cannot tell a delete of its own from a listener's
// receive, and says so. (It said ErrAlreadyDelivered for a message it had
// deleted.)
func TestACancelWhoseDeleteLostItsAnswerCannotTell(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := &lostAnswer{lose: func(req *http.Request) bool {
		return req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/messages/")
	}}
	l.left.Store(1)
	name := uniqueName(t)
	createQueue(t, name)
	p := publisherThrough(t, lostAnswerAccount(t, l), name, uniqueName(t))
	s, err := p.SendAfter(ctx, job{N: 1}, time.Hour)
	require.NoError(t, err)
	err = p.Cancel(ctx, s.Token)
	require.Equal(t, int32(1), l.taken.Load(), "the delete's answer was lost")
	assert.ErrorIs(t, err, ErrCancelUndetermined)
	assert.NotErrorIs(t, err, ErrAlreadyDelivered)
	assert.ErrorIs(t, p.Cancel(ctx, s.Token), ErrCancelUndetermined, "a second cancel says the same")
	q, err := testAccount(t, nil).Queue(name)
	require.NoError(t, err)
	assert.Zero(t, depth(t, q), "deleted all the same")
}
