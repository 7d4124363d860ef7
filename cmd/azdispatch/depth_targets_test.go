package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// depth over several targets: one row per queue and shard, in the order
// given, one total; a target that does not exist fails the command and
// is named, beside the others' readings.
func TestDepthOverSeveralTargets(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	first, second := createdQueue(t, conn), createdQueue(t, conn)
	_, err := first.Send(context.Background(), "hello", nil)
	require.NoError(t, err)
	a, _ := twoAccounts(t, conn, conn)
	base := uniqueName(t)
	fullSet(t, base, 2, a)

	var depth depthDoc
	runJSON(t, env, exitOK, &depth, "depth", "-queue", first.Name(), "-base", base, "-shards", "2", "-queue", second.Name())
	assert.Equal(t, first.Name()+", "+base+", "+second.Name(), depth.Target)
	var queues []string
	for _, r := range depth.Queues {
		queues = append(queues, r.Queue)
	}
	assert.Equal(t, []string{first.Name(), base + "-0", base + "-1", second.Name()}, queues, "in the order given")
	assert.Equal(t, 3, depth.Total)

	r := run(t, env, "", "depth", "-queue", first.Name(), "-queue", second.Name())
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `TOTAL\s+1\s+0`, r.stdout)

	typo := uniqueName(t)
	r = runJSON(t, env, exitFailed, &depth, "depth", "-queue", first.Name(), "-queue", typo)
	require.Len(t, depth.Queues, 2)
	assert.Empty(t, depth.Queues[0].Error, "the queue that exists is read")
	assert.Equal(t, 1, depth.Queues[0].Depth)
	assert.Equal(t, errNoSuchQueue.Error(), depth.Queues[1].Error)
	assert.Contains(t, r.stderr, typo+": no such queue")
}
