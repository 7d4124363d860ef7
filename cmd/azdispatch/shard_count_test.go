package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// twoAccounts opens the emulators' accounts through the library, for a
// test's own setup.
func twoAccounts(t *testing.T, connA, connB string) (*azdispatch.Account, *azdispatch.Account) {
	t.Helper()
	a, err := azdispatch.NewAccountFromConnectionString(connA, nil)
	require.NoError(t, err)
	b, err := azdispatch.NewAccountFromConnectionString(connB, nil)
	require.NoError(t, err)
	return a, b
}

// fullSet creates a set of n shards named base over accounts, with one
// message in each shard.
func fullSet(t *testing.T, base string, n int, accounts ...*azdispatch.Account) []azdispatch.Shard {
	t.Helper()
	ctx := context.Background()
	shards, err := azdispatch.AccountShards(base, n, accounts...)
	require.NoError(t, err)
	sq, err := azdispatch.NewShardedQueue(base, shards, nil)
	require.NoError(t, err)
	require.NoError(t, sq.Create(ctx))
	for _, sh := range shards {
		_, err := sh.Send(ctx, "m", nil)
		require.NoError(t, err)
	}
	return shards
}

// -shards that does not match the set that exists is refused by every
// command, with exit 2 and both numbers, before anything is shown or sent:
// more than there are (the report: -shards 6 over 4 listed two shards that
// do not exist, at depth 0), fewer (-shards 3 left one out), and the
// accounts given in another order than the set's.
func TestShardsThatDoNotMatchTheSetFail(t *testing.T) {
	t.Parallel()
	connA, connB := accounts(t)
	env := map[string]string{"AZ_ACCOUNT_A": connA, "AZ_ACCOUNT_B": connB}
	accts := []string{"-account-env", "AZ_ACCOUNT_A", "-account-env", "AZ_ACCOUNT_B"}
	a, b := twoAccounts(t, connA, connB)
	base := uniqueName(t)
	fullSet(t, base, 4, a, b)
	// A queue of another set whose name starts with the same base is no
	// shard of this one.
	other, err := a.Queue(base + "-eu-9")
	require.NoError(t, err)
	require.NoError(t, other.Create(context.Background()))
	target := func(n string) []string { return append([]string{"-base", base, "-shards", n}, accts...) }

	var depth depthDoc
	runJSON(t, env, exitOK, &depth, append([]string{"depth"}, target("4")...)...)
	require.Len(t, depth.Queues, 4)
	assert.Equal(t, 4, depth.Total)

	for _, c := range []struct {
		shards string
		says   []string
	}{
		{"6", []string{"-shards 6 does not match the set " + base, "the queues that exist make 4 shards",
			base + "-3 (in devstoreaccount1 (AZ_ACCOUNT_B))", base + "-4 and " + base + "-5 do not exist", "Give -shards 4"}},
		{"3", []string{"-shards 3 does not match the set " + base, "it has at least 4 shards",
			base + "-3 (in devstoreaccount1 (AZ_ACCOUNT_B)) exists", "give -shards 4"}},
	} {
		for _, cmd := range [][]string{{"depth"}, {"peek"}, {"poison", "list"}, {"send", "-key", "k", "text"}, {"send", "text"}} {
			args := append(cmd, target(c.shards)...)
			r := run(t, env, "", args...)
			assert.Equal(t, exitUsage, r.code, "%v: %s", args, r)
			assert.Empty(t, r.stdout, "%v: nothing shown", args)
			for _, s := range c.says {
				assert.Contains(t, r.stderr, s, "%v", args)
			}
			assert.NotContains(t, r.stderr, "AccountKey", "%v", args)
		}
		var doc errorDoc
		runJSON(t, env, exitUsage, &doc, append([]string{"depth"}, target(c.shards)...)...)
		assert.Contains(t, doc.Error, c.says[0])
		assert.Equal(t, exitUsage, doc.ExitCode)
	}
	runJSON(t, env, exitOK, &depth, append([]string{"depth"}, target("4")...)...)
	assert.Equal(t, 4, depth.Total, "the refused sends sent nothing")

	r := run(t, env, "", "depth", "-base", base, "-shards", "4", "-account-env", "AZ_ACCOUNT_B", "-account-env", "AZ_ACCOUNT_A")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, base+"-0 (in devstoreaccount1 (AZ_ACCOUNT_A)) exists, but not in devstoreaccount1 (AZ_ACCOUNT_B)")
	assert.Contains(t, r.stderr, "give the accounts in the order the set's publishers do")
}
