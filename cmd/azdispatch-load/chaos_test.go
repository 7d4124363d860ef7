package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A minute of chaos with raised fault rates, end to end: worker processes
// (this test binary again, see TestMain), kills, storms, a hanging proxy.
// The verdict is asserted, and that every fault kind happened; the seed is
// logged, so a failure can be replayed with -seed.
func TestChaosShortRunKeepsEveryMessage(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	t.Parallel()
	cfg := chaosQuick(time.Minute)
	rec := runSoak[chaosRecord](t, runChaos, options{chaos: &cfg})
	assert.True(t, rec.OK)
	assert.Zero(t, rec.Lost, "lost")
	assert.Zero(t, rec.Unexpected, "unexpected")
	assert.Zero(t, rec.WronglyPoisoned, "wrongly poisoned")
	assert.True(t, rec.BoundHeld, "duplicates within the bound")
	assert.Positive(t, rec.Sent)
	assert.GreaterOrEqual(t, rec.Handled, rec.Sent)
	for _, k := range faultKinds {
		assert.Positive(t, rec.Faults[k], "fault %s injected", k)
	}
	assert.Positive(t, rec.StormsPastMax, "a storm brought a handled message back past MaxDequeueCount")
	assert.Positive(t, rec.State.HandledBefore, "deleted on redelivery without the handler")
}

// The checker, on records written by hand.
func TestChaosCheckCountsLikeTotalQueue(t *testing.T) {
	t.Parallel()
	sends := map[int]sendStatus{1: sendOK, 2: sendOK, 3: sendOK, 4: sendIndeterminate, 5: sendIndeterminate, 6: sendRefused, 7: sendOK}
	killed := "H 1 a 1\nD a\nH 2 b 1\nH 3 c 1\nX c\n" // b handled, then the process died before its delete; c's delete failed
	lived := "H 2 b 2\nD b\nH 4 d 1\nX d\n" +         // d handled, its delete failed: a lost acknowledgement
		"H 4 d 2\nD d\nH 6 f 1\nD f\nF 503 -\nF lost_delete d\n" +
		"H 9 z 1\nD z\n" + // never sent
		"H 1 a 2\n" // handled again, and no delete made: ownership lost
	incs := []incarnation{
		{worker: 0, number: 1, killed: true, records: strings.NewReader(killed)},
		{worker: 1, number: 1, records: strings.NewReader(lived)},
	}
	v, err := check(sends, incs, []int{7})
	require.NoError(t, err)
	assert.Equal(t, 4, v.Sent)
	assert.Equal(t, 2, v.Indeterminate)
	assert.Equal(t, 1, v.Recovered) // 4
	assert.Equal(t, 1, v.Refused)
	assert.Equal(t, 0, v.Lost)       // 3 was handled, 7 is poisoned, counted there
	assert.Equal(t, 2, v.Unexpected) // 6 was refused for certain, 9 never sent
	assert.Equal(t, 1, v.WronglyPoisoned)
	assert.Equal(t, 3, v.Duplicated) // 1, 2 and 4
	assert.Equal(t, 3, v.DuplicateHandlings)
	assert.Equal(t, 1, v.KillInFlight) // b
	assert.Equal(t, 3, v.LostAcks)     // c and d failed, a's second never sent
	assert.Equal(t, 1, v.LostAcksUnsent)
	assert.Equal(t, 4, v.bound())
	assert.True(t, v.boundHeld())
	assert.False(t, v.ok())
	assert.Equal(t, map[string]int{"503": 1, "lost_delete": 1}, v.Faults)

	// A handling after an acknowledged one is beyond the bound.
	v, err = check(map[int]sendStatus{1: sendOK}, []incarnation{{records: strings.NewReader("H 1 a 1\nD a\nH 1 a 2\nD a\n")}}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, v.DuplicateHandlings)
	assert.Zero(t, v.bound())
	assert.False(t, v.boundHeld())
}

// stubTransport answers every request with 204 (201 for a send, 200 with a
// message for a receive) and counts the requests that reached it.
type stubTransport struct{ made int }

func (s *stubTransport) Do(req *http.Request) (*http.Response, error) {
	s.made++
	status, body := http.StatusNoContent, ""
	switch op, _, _ := classify(req); op {
	case opSend:
		status, body = http.StatusCreated, `<?xml version="1.0" encoding="utf-8"?><QueueMessagesList><QueueMessage><MessageId>m</MessageId><PopReceipt>r</PopReceipt></QueueMessage></QueueMessagesList>`
	case opReceive:
		status, body = http.StatusOK, `<?xml version="1.0" encoding="utf-8"?><QueueMessagesList><QueueMessage><MessageId>m</MessageId><PopReceipt>r</PopReceipt><DequeueCount>3</DequeueCount><MessageText>x</MessageText></QueueMessage></QueueMessagesList>`
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// The SDK reads a synthetic answer as the service's: a *ResponseError with
// the error code, after its retries; the request never reaches the service.
func TestChaosSyntheticAnswerReadsAsTheService(t *testing.T) {
	t.Parallel()
	stub := &stubTransport{}
	var kinds []string
	ft := &faultTransport{next: stub, rng: newLockedRand(1, 1), rates: faultRates{ServerBusy: 1},
		note: func(_ *http.Request, kind string, _ requestOp, _ string) { kinds = append(kinds, kind) }}
	q := chaosTestClient(t, ft, 2)
	_, err := q.DeleteMessage(context.Background(), "id1", "receipt", nil)
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusServiceUnavailable, re.StatusCode)
	assert.Equal(t, "ServerBusy", re.ErrorCode)
	assert.Zero(t, stub.made)
	assert.Equal(t, []string{"503", "503", "503"}, kinds) // the first try and two retries
}

// A lost response: the request is made, the SDK gets a transport error and
// retries, and the retry's answer is what the caller sees.
func TestChaosLostResponseIsMadeThenRetried(t *testing.T) {
	t.Parallel()
	stub := &stubTransport{}
	var kinds []string
	ft := &faultTransport{next: stub, rng: newLockedRand(1, 1), rates: faultRates{LostDelete: 1},
		note: func(_ *http.Request, kind string, _ requestOp, id string) { kinds = append(kinds, kind+" "+id) }}
	q := chaosTestClient(t, ft, 1)
	_, err := q.DeleteMessage(context.Background(), "id1", "receipt", nil)
	require.Error(t, err)
	assert.True(t, errors.Is(err, errLostResponse), "%v", err)
	assert.Equal(t, 2, stub.made)
	assert.Equal(t, []string{"lost_delete id1", "lost_delete id1"}, kinds)

	// A receive's body reaches the observer; a quiet transport injects nothing.
	var seen []byte
	ft = &faultTransport{next: stub, rng: newLockedRand(1, 1), rates: faultRates{LostReceive: 1},
		note: func(*http.Request, string, requestOp, string) { t.Error("a fault while quiet") }, received: func(b []byte) { seen = b }}
	ft.setMode(modeQuiet)
	resp, err := chaosTestClient(t, ft, 0).DequeueMessage(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, resp.Messages, 1)
	assert.Equal(t, int64(3), *resp.Messages[0].DequeueCount)
	assert.Contains(t, string(seen), "<DequeueCount>3</DequeueCount>")
}

func chaosTestClient(t *testing.T, ft *faultTransport, retries int32) *azqueue.QueueClient {
	t.Helper()
	if retries == 0 {
		retries = -1
	}
	q, err := azqueue.NewQueueClientWithNoCredential("http://127.0.0.1:1/devstoreaccount1/q", &azqueue.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: ft, Retry: policy.RetryOptions{MaxRetries: retries, RetryDelay: time.Millisecond}},
	})
	require.NoError(t, err)
	return q
}

func TestChaosClassify(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, path string
		op           requestOp
		id           string
	}{
		{http.MethodGet, "/devstoreaccount1/q/messages?numofmessages=32", opReceive, ""},
		{http.MethodGet, "/devstoreaccount1/q/messages?peekonly=true", opOther, ""},
		{http.MethodPost, "/devstoreaccount1/q/messages", opSend, ""},
		{http.MethodDelete, "/devstoreaccount1/q/messages/abc?popreceipt=x", opDelete, "abc"},
		{http.MethodPut, "/devstoreaccount1/q/messages/abc?popreceipt=x", opUpdate, "abc"},
		{http.MethodGet, "/devstoreaccount1/q?comp=metadata", opOther, ""},
	} {
		req, err := http.NewRequest(c.method, "http://127.0.0.1"+c.path, nil)
		require.NoError(t, err)
		op, queue, id := classify(req)
		assert.Equal(t, c.op, op, c.path)
		assert.Equal(t, c.id, id, c.path)
		if op != opOther {
			assert.Equal(t, "q", queue, c.path)
		}
	}
}

// A hanging connection is accepted and never answered; with hanging off,
// the proxy forwards.
func TestChaosProxyHangsOrForwards(t *testing.T) {
	t.Parallel()
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(backend) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })

	p, err := startHangProxy(backend.Addr().String(), newLockedRand(1, 1), 1)
	require.NoError(t, err)
	t.Cleanup(p.close)
	get := func(timeout time.Duration) error {
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: timeout}).Get("http://" + p.addr() + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, get(time.Minute))
	p.setHanging(true)
	require.Error(t, get(300*time.Millisecond), "a hung connection answers nothing")
	assert.Equal(t, int64(1), p.hangs.Load())
	p.setHanging(false)
	require.NoError(t, get(time.Minute))
}

func TestChaosWorkerConnectionGoesThroughTheProxy(t *testing.T) {
	t.Parallel()
	cs := "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=k;BlobEndpoint=http://127.0.0.1:1/a;QueueEndpoint=http://127.0.0.1:2/a;"
	got := withQueueEndpoint(cs, "http://127.0.0.1:3/a")
	assert.Equal(t, "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=k;BlobEndpoint=http://127.0.0.1:1/a;QueueEndpoint=http://127.0.0.1:3/a", got)
}
