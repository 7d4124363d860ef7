package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// depth shows how long the front messages of each queue have waited, by
// the service's clock, with one peek of up to 32, which -visible also
// counts: the same age either way. A message sent for
// later is hidden, and not seen.
func TestDepthShowsTheOldestAge(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	q := createdQueue(t, conn)
	ctx := context.Background()
	_, err := q.Send(ctx, "later", &azdispatch.SendOptions{Delay: time.Hour})
	require.NoError(t, err)
	_, err = q.Send(ctx, "now", nil)
	require.NoError(t, err)
	// The service stamps times to the second: after 2 s the message is at
	// least 1 s old by its clock, however the seconds fall.
	time.Sleep(2*time.Second + 100*time.Millisecond)

	var depth depthDoc
	runJSON(t, env, exitOK, &depth, "depth", "-queue", q.Name())
	require.Len(t, depth.Queues, 1)
	r := depth.Queues[0]
	assert.Equal(t, 2, r.Depth)
	require.NotNil(t, r.OldestAge)
	assert.GreaterOrEqual(t, *r.OldestAge, 1.0)
	require.NotNil(t, depth.OldestAge)
	assert.Equal(t, *r.OldestAge, *depth.OldestAge, "one queue: its age is the oldest")
	assert.Nil(t, r.Visible, "without -visible nothing is counted")

	var visible depthDoc
	runJSON(t, env, exitOK, &visible, "depth", "-visible", "-queue", q.Name())
	v := visible.Queues[0]
	require.NotNil(t, v.Visible)
	assert.Equal(t, 1, *v.Visible, "the delayed message is hidden")
	require.NotNil(t, v.OldestAge)
	assert.GreaterOrEqual(t, *v.OldestAge, *r.OldestAge, "the same front, read later")

	out := run(t, env, "", "depth", "-queue", q.Name())
	require.Equal(t, exitOK, out.code, out)
	assert.Contains(t, out.stdout, "OLDEST")
	assert.Regexp(t, `\d+s\n`, out.stdout, "the age as a duration")
}

// On a set, each shard has its own age, and the document the greatest;
// an empty shard reads 0, and so does one that does not exist yet (below
// the last that does: a set whose last shards do not exist reads as a
// smaller one, see TestShardsThatDoNotMatchTheSetFail), marked missing.
func TestDepthShowsTheOldestAgePerShard(t *testing.T) {
	t.Parallel()
	connA, connB := accounts(t)
	env := map[string]string{"AZ_ACCOUNT_A": connA, "AZ_ACCOUNT_B": connB}
	base := uniqueName(t)
	target := []string{"-base", base, "-shards", "3", "-account-env", "AZ_ACCOUNT_A", "-account-env", "AZ_ACCOUNT_B"}
	a, err := azdispatch.NewAccountFromConnectionString(connA, nil)
	require.NoError(t, err)
	b, err := azdispatch.NewAccountFromConnectionString(connB, nil)
	require.NoError(t, err)
	set, err := azdispatch.AccountShards(base, 3, a, b)
	require.NoError(t, err)
	ctx := context.Background()
	// Shard 0 (account A) holds an old message, shard 2 (account A) is
	// created and empty, shard 1 (account B) does not exist.
	for _, i := range []int{0, 2} {
		require.NoError(t, set[i].(*azdispatch.Queue).Create(ctx))
	}
	_, err = set[0].Send(ctx, "old", nil)
	require.NoError(t, err)
	time.Sleep(2*time.Second + 100*time.Millisecond)

	for _, args := range [][]string{{"depth"}, {"depth", "-visible"}} {
		var depth depthDoc
		runJSON(t, env, exitOK, &depth, append(args, target...)...)
		require.Len(t, depth.Queues, 3)
		for i, r := range depth.Queues {
			require.NotNil(t, r.OldestAge, "%v: shard %d", args, i)
		}
		assert.GreaterOrEqual(t, *depth.Queues[0].OldestAge, 1.0, args)
		assert.Zero(t, *depth.Queues[2].OldestAge, "%v: an empty shard", args)
		assert.False(t, depth.Queues[2].Missing, args)
		assert.Zero(t, *depth.Queues[1].OldestAge, "%v: a shard not created yet", args)
		assert.True(t, depth.Queues[1].Missing, "%v: a shard not created yet", args)
		require.NotNil(t, depth.OldestAge)
		assert.Equal(t, *depth.Queues[0].OldestAge, *depth.OldestAge, args)
	}
	out := run(t, env, "", append([]string{"depth"}, target...)...)
	require.Equal(t, exitOK, out.code, out)
	assert.Regexp(t, `TOTAL\s+1\s+0\s+\d+s`, out.stdout)
	assert.Regexp(t, base+`-1\s+devstoreaccount1 \(AZ_ACCOUNT_B\)\s+no queue\s+0\s+-\n`, out.stdout, "not shown as depth 0")
}
