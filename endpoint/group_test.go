package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
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
	h, err := NewGroupStatusHandler(store, &GroupStatusOptions{RetryAfter: 1500 * time.Millisecond})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/groups/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (*http.Response, groupReport) {
		resp, err := http.Get(srv.URL + path)
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
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	post, err := http.Post(srv.URL+"/groups/"+id, "text/plain", nil)
	require.NoError(t, err)
	post.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, post.StatusCode)

	_, err = NewGroupStatusHandler(nil, nil)
	assert.ErrorIs(t, err, azdispatch.ErrInvalidConfig)
}
