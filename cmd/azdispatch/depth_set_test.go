package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// depth -prefix lists a queue set: every queue whose name starts with the
// prefix, its poison queue beside it rather than as a queue of its own,
// and their total; a prefix that names no queue fails as a mistyped name.
func TestDepthListsAQueueSetByPrefix(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	acct, err := azdispatch.NewAccountFromConnectionString(conn, nil)
	require.NoError(t, err)
	prefix := uniqueName(t) + "-"
	ctx := context.Background()
	for i, tenant := range []string{"a", "b"} {
		q, err := acct.Queue(prefix + tenant)
		require.NoError(t, err)
		require.NoError(t, q.Create(ctx))
		for range i + 1 {
			_, err := q.Send(ctx, "work", nil)
			require.NoError(t, err)
		}
		require.NoError(t, q.PoisonQueue().(*azdispatch.Queue).Create(ctx))
	}
	var depth depthDoc
	runJSON(t, env, exitOK, &depth, "depth", "-prefix", prefix)
	var queues []string
	for _, r := range depth.Queues {
		queues = append(queues, r.Queue)
	}
	assert.Equal(t, []string{prefix + "a", prefix + "b"}, queues)
	assert.Equal(t, 3, depth.Total)

	r := run(t, env, "", "depth", "-prefix", uniqueName(t)+"-")
	assert.Equal(t, exitFailed, r.code, r)
	assert.Contains(t, r.stderr, "no queue's name starts with")
}
