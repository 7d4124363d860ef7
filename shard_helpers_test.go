package azdispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// Sharded tests need several accounts, each its own Azurite process. Two
// spare processes are started on first need and shared (every test uses its
// own queue names); TestMain stops them.
var spare struct {
	once      sync.Once
	emulators []*azurite.Instance
	err       error
}

func spareEmulators(t testing.TB) []*azurite.Instance {
	t.Helper()
	needStorage(t)
	spare.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for range 2 {
			em, err := azurite.Start(ctx, &azurite.Options{Fresh: true})
			if err != nil {
				spare.err = err
				return
			}
			spare.emulators = append(spare.emulators, em)
		}
	})
	require.NoError(t, spare.err, azurite.HowTo)
	return spare.emulators
}

func stopSpareEmulators() {
	for _, em := range spare.emulators {
		_ = em.Stop()
	}
}

// quickRetries makes the SDK give up on a dead endpoint in milliseconds, not
// in the tens of seconds of its default back-off, so that the shard's
// breaker, not the SDK, is what the tests see.
func quickRetries(transport policy.Transporter) *AccountOptions {
	return &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: transport,
		Retry: policy.RetryOptions{
			MaxRetries: 1, TryTimeout: 5 * time.Second,
			RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond,
		},
	}}}
}

// threeAccounts opens the suite's Azurite and the two spare ones: three
// accounts, each its own process and port.
func threeAccounts(t testing.TB) []*Account {
	t.Helper()
	accts := []*Account{testAccount(t, quickRetries(nil))}
	for _, em := range spareEmulators(t) {
		a, err := NewAccountFromConnectionString(em.ConnectionString(), quickRetries(nil))
		require.NoError(t, err)
		accts = append(accts, a)
	}
	return accts
}

// shardedQueue returns a new sharded queue of n shards over accts.
func shardedQueue(t testing.TB, n int, opts *ShardedQueueOptions, accts ...*Account) *ShardedQueue {
	t.Helper()
	shards, err := AccountShards(uniqueName(t), n, accts...)
	require.NoError(t, err)
	var o ShardedQueueOptions
	if opts != nil {
		o = *opts
	}
	if o.TryTimeout == 0 {
		// An emulator on a loaded machine may take seconds to create a
		// queue on its first send: the tests that mean a shard to time
		// out say so.
		o.TryTimeout = 30 * time.Second
	}
	sq, err := NewShardedQueue("tasks", shards, &o)
	require.NoError(t, err)
	return sq
}

// shardDepths reads each shard's depth.
func shardDepths(t testing.TB, sq *ShardedQueue) []int {
	t.Helper()
	var out []int
	for _, sh := range sq.Shards() {
		n, err := sh.Depth(context.Background())
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}
