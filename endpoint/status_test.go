package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// Against Azurite, a group's status in the manner of Asynchronous
// Request-Reply: 202 with Retry-After while a child is pending, 200 with
// the outcome and the poisoned child's reason once complete; 404 for an
// unknown group, 400 for an ID that could name another blob, 405 for a
// write.
func TestGroupStatusAnswersAsAsynchronousRequestReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	store, err := q.Account().PayloadStore("")
	require.NoError(t, err)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	then, err := azdispatch.ContinueWith(pub, "next")
	require.NoError(t, err)
	id := "http-" + uniqueName(t)
	g, err := store.StartGroup(ctx, 2, then, &azdispatch.GroupOptions{ID: id, Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)
	h, err := NewStatusHandler(store, &StatusOptions{RetryAfter: 1500 * time.Millisecond})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/status/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (*http.Response, groupReport) {
		resp, err := http.Get(srv.URL + "/status" + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var rep groupReport
		if resp.Header.Get("Content-Type") == "application/json" {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		}
		return resp, rep
	}

	resp, rep := get("/groups/" + id)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"), "whole seconds, rounded up")
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	assert.Equal(t, groupReport{ID: id, Status: "running", Size: 2, Pending: 2, Failures: []groupFailure{}}, rep)

	for i, body := range []string{"ok", "broken"} {
		_, err := pub.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "broken" {
			return azdispatch.Permanent(errors.New("cannot be made"))
		}
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Run(runCtx) }()
	require.Eventually(t, func() bool {
		resp, _ := get("/groups/" + id)
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond)
	stop()
	require.NoError(t, <-ended)

	resp, rep = get("/groups/" + id)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Retry-After"))
	assert.Equal(t, "failed", rep.Status)
	assert.Equal(t, 1, rep.Succeeded)
	require.Len(t, rep.Failures, 1)
	assert.Equal(t, 1, rep.Failures[0].Child)
	assert.Contains(t, rep.Failures[0].Reason, "cannot be made")

	resp, _ = get("/groups/never-started")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	for _, bad := range []string{"/groups/", "/groups/a%2Fb", "/groups/a%00", "/groups/..."} {
		resp, _ = get(bad)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
	}
	resp, _ = get("/groups/..") // cleaned by the mux before the handler
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	post, err := http.Post(srv.URL+"/status/groups/"+id, "text/plain", nil)
	require.NoError(t, err)
	post.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, post.StatusCode)

	_, err = NewStatusHandler(nil, nil)
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
}

// Against Azurite, a tracked message's status in the manner of
// Asynchronous Request-Reply: 202 with Retry-After while it waits and
// while its handler runs, then 303 See Other to its result once it
// succeeded (a ResultURL is set), or 200 for one poisoned; 404 for an
// unknown token, 400 for one that is not a token or another kind.
func TestMessageStatusAnswersAsAsynchronousRequestReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	store, err := q.Account().PayloadStore("")
	require.NoError(t, err)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Payloads: store})
	require.NoError(t, err)
	h, err := NewStatusHandler(store, &StatusOptions{RetryAfter: time.Second, ResultURL: func(kind, id string) string {
		return "/results/" + kind + "/" + id
	}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (*http.Response, messageReport) {
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var rep messageReport
		if resp.Header.Get("Content-Type") == "application/json" {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		}
		return resp, rep
	}

	ok, err := pub.SendWith(ctx, "ok", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	broken, err := pub.SendWith(ctx, "broken", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)
	resp, rep := get("/messages/" + ok.StatusToken)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "pending", rep.Status)
	assert.Equal(t, q.Name(), rep.Queue)

	inHandler := make(chan string, 2)
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "broken" {
			return azdispatch.Permanent(errors.New("cannot be made"))
		}
		resp, rep := get("/messages/" + ok.StatusToken)
		inHandler <- fmt.Sprint(resp.StatusCode, " ", rep.Status)
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Payloads: azdispatch.PayloadOptions{Store: store},
		Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { s := l.State(); return s.Succeeded >= 1 && s.Poisoned >= 1 }, time.Minute, 50*time.Millisecond)
	stop()
	require.NoError(t, <-ended)
	assert.Equal(t, "202 delivered", <-inHandler, "while its handler runs")

	resp, rep = get("/messages/" + ok.StatusToken)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/results/messages/"+ok.StatusToken, resp.Header.Get("Location"))
	assert.Equal(t, "succeeded", rep.Status)
	assert.Equal(t, 1, rep.Tries)
	assert.Equal(t, ok.ID, rep.MessageID)
	resp, rep = get("/messages/" + broken.StatusToken)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a failure has no result to go to")
	assert.Equal(t, "poisoned", rep.Status)
	assert.Contains(t, rep.Reason, "cannot be made")

	resp, _ = get("/messages/0123456789abcdef0123456789abcdef")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	for _, bad := range []string{"/messages/" + strings.ToUpper(ok.StatusToken), "/messages/..%2Fx", "/other/" + ok.StatusToken, "/" + ok.StatusToken} {
		resp, _ = get(bad)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
	}
}
