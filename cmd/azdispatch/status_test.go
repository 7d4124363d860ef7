package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// status -group shows a group's progress, in a table and in JSON: waiting (exit
// 3) while a child is pending, then complete with its outcome and the
// poisoned child's reason; an unknown group fails, and no -id is a usage
// error.
func TestStatusShowsAGroupsProgress(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	ctx := context.Background()
	q := createdQueue(t, conn)
	store, err := q.Account().PayloadStore("")
	require.NoError(t, err)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	then, err := azdispatch.ContinueWith(pub, "next")
	require.NoError(t, err)
	id := "cli-" + uniqueName(t)
	g, err := store.StartGroup(ctx, 2, then, &azdispatch.GroupOptions{ID: id, Rule: azdispatch.ContinueOnFinish})
	require.NoError(t, err)

	var doc groupDoc
	runJSON(t, env, exitAttention, &doc, "status", "-group", id)
	assert.Equal(t, groupDoc{Container: azdispatch.DefaultPayloadContainer, ID: id, Size: 2, Pending: 2, Failures: []groupFailure{}}, doc)

	for i, body := range []string{"ok", "broken"} {
		_, err := pub.SendWith(ctx, body, &azdispatch.SendOptions{Group: g.Child(i)})
		require.NoError(t, err)
	}
	l, err := azdispatch.NewListener(q, func(_ context.Context, m *azdispatch.Message[string]) error {
		if m.Body == "broken" {
			return azdispatch.Permanent(errors.New("a child that cannot be made"))
		}
		return nil
	}, &azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { s := l.State(); return s.Succeeded >= 2 && s.Poisoned >= 1 }, time.Minute, 50*time.Millisecond)
	stop()
	require.NoError(t, <-ended)

	runJSON(t, env, exitOK, &doc, "status", "-group", id)
	assert.True(t, doc.Complete)
	assert.Equal(t, "failed", doc.Outcome)
	assert.Equal(t, 1, doc.Succeeded)
	require.Len(t, doc.Failures, 1)
	assert.Equal(t, 1, doc.Failures[0].Child)
	assert.Contains(t, doc.Failures[0].Reason, "a child that cannot be made")
	r := run(t, env, "", "status", "-group", id)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "failed")
	assert.Contains(t, r.stdout, "a child that cannot be made")

	r = run(t, env, "", "status", "-group", "never-started")
	assert.Equal(t, exitFailed, r.code, r)
	assert.Contains(t, r.stderr, "group not found")
	for _, args := range [][]string{{"status"}, {"status", "-group", id, "-token", "x"}} {
		r = run(t, env, "", args...)
		assert.Equal(t, exitUsage, r.code, r)
	}
}

// status -token shows a tracked message's state: pending (exit 3) until it
// is handled, then succeeded; a token that names nothing fails.
func TestStatusShowsATrackedMessage(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	ctx := context.Background()
	q := createdQueue(t, conn)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw()})
	require.NoError(t, err)
	sent, err := pub.SendWith(ctx, "x", &azdispatch.SendOptions{Track: true})
	require.NoError(t, err)

	var doc messageDoc
	runJSON(t, env, exitAttention, &doc, "status", "-token", sent.StatusToken)
	assert.Equal(t, "pending", doc.State)
	assert.Equal(t, q.Name(), doc.Queue)

	l, err := azdispatch.NewListener(q, func(context.Context, *azdispatch.Message[string]) error { return nil },
		&azdispatch.ListenerOptions{Codec: azdispatch.Raw(), Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, 50*time.Millisecond)}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Run(runCtx) }()
	require.Eventually(t, func() bool { return l.State().Succeeded >= 1 }, time.Minute, 50*time.Millisecond)
	stop()
	require.NoError(t, <-ended)

	runJSON(t, env, exitOK, &doc, "status", "-token", sent.StatusToken)
	assert.Equal(t, "succeeded", doc.State)
	assert.True(t, doc.Final)
	assert.Equal(t, sent.ID, doc.MessageID)
	r := run(t, env, "", "status", "-token", "0123456789abcdef0123456789abcdef")
	assert.Equal(t, exitFailed, r.code, r)
	assert.Contains(t, r.stderr, "not found")
}
