package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// send says which queue took the message, with its account and, on a set,
// its shard: a keyed send its key's shard, a round-robin send the one the
// library chose, and the message is there. A new set is created whole by
// its first send, so that the next command reads it back at its size.
func TestSendNamesTheShardThatTookIt(t *testing.T) {
	t.Parallel()
	connA, connB := accounts(t)
	env := map[string]string{"AZ_ACCOUNT_A": connA, "AZ_ACCOUNT_B": connB}
	a, b := twoAccounts(t, connA, connB)
	base := uniqueName(t)
	const shards = 4
	target := []string{"-base", base, "-shards", "4", "-account-env", "AZ_ACCOUNT_A", "-account-env", "AZ_ACCOUNT_B"}
	set, err := azdispatch.AccountShards(base, shards, a, b)
	require.NoError(t, err)
	accountOf := func(i int) string {
		return []string{"devstoreaccount1 (AZ_ACCOUNT_A)", "devstoreaccount1 (AZ_ACCOUNT_B)"}[i%2]
	}

	// send runs send -json: a document of its own each time, since
	// decoding leaves alone what a document omits.
	send := func(env map[string]string, args ...string) sendDoc {
		t.Helper()
		var doc sendDoc
		runJSON(t, env, exitOK, &doc, append([]string{"send"}, args...)...)
		return doc
	}
	sent := send(env, append([]string{"first"}, target...)...)
	assert.Equal(t, shards, sent.Created, "a new set is created whole")
	require.NotNil(t, sent.Shard)
	assert.Equal(t, fmt.Sprintf("%s-%d", base, *sent.Shard), sent.Queue)
	assert.Equal(t, accountOf(*sent.Shard), sent.Account)
	var depth depthDoc
	runJSON(t, env, exitOK, &depth, append([]string{"depth"}, target...)...)
	require.Len(t, depth.Queues, shards)
	for _, r := range depth.Queues {
		assert.False(t, r.Missing, "%s exists", r.Queue)
	}

	ctx := context.Background()
	seen := map[int]bool{}
	for i := range shards {
		text := fmt.Sprintf("round robin %d", i)
		sent := send(env, append([]string{text}, target...)...)
		assert.Zero(t, sent.Created, "the set exists now")
		require.NotNil(t, sent.Shard, text)
		n := *sent.Shard
		seen[n] = true
		assert.Equal(t, set[n].Name(), sent.Queue, text)
		assert.Equal(t, accountOf(n), sent.Account, text)
		peeked, err := set[n].(*azdispatch.Queue).Peek(ctx, azdispatch.MaxBatch)
		require.NoError(t, err)
		var ids []string
		for _, d := range peeked {
			ids = append(ids, d.ID)
		}
		assert.Contains(t, ids, sent.ID, "the message is on the shard named")
	}
	assert.NotEmpty(t, seen)

	key := keyOnShard(shards, 1)
	want := azdispatch.KeyShard(key, shards)
	sent = send(env, append([]string{"-key", key, "keyed"}, target...)...)
	require.NotNil(t, sent.Shard)
	assert.Equal(t, want, *sent.Shard, "the key's shard")
	assert.Equal(t, set[want].Name(), sent.Queue)
	assert.Equal(t, "devstoreaccount1 (AZ_ACCOUNT_B)", sent.Account)

	r := run(t, env, "", append([]string{"send", "-key", key, "keyed"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, fmt.Sprintf("to %s, shard %d of %s (in devstoreaccount1 (AZ_ACCOUNT_B)) as a message", set[want].Name(), want, base))

	// One queue: its name and account, and no shard.
	queue := uniqueName(t)
	single := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": connA}
	sent = send(single, "-queue", queue, "one")
	assert.Equal(t, queue, sent.Queue)
	assert.Equal(t, "devstoreaccount1", sent.Account)
	assert.Nil(t, sent.Shard)
	assert.Zero(t, sent.Created)
	r = run(t, single, "", "send", "-queue", queue, "two")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "sent 3 bytes to "+queue+" (in devstoreaccount1) as a message")
}
