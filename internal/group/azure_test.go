package group

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/internal/blobs"
)

// Against Azurite, a sharded group's children finish on many goroutines at
// once, some twice: the group completes, its status agrees, and the last
// finish takes a few requests, not a scan.
func TestAGroupCompletesAgainstAzurite(t *testing.T) {
	t.Parallel()
	azurite.SkipIfShort(t) // -short promises a run without Node.js; a full run fails without the emulator
	emulator := azurite.ForTest(t)
	c, err := container.NewClientFromConnectionString(emulator.ConnectionString(), "groups", nil)
	require.NoError(t, err)
	ctx := context.Background()
	s := New(blobs.NewAzure(c, "groups", nil), "g/", nil)

	const size = 1200 // 19 shards
	sp := spec("azurite", size, OnFinish)
	sp.Then = []byte(strings.Repeat("t", 4000)) // kept in the head's metadata: the service takes 8 KiB
	require.NoError(t, s.Create(ctx, sp))
	require.NoError(t, s.Create(ctx, sp), "created again: the same group")
	refs := sp.Refs()
	jobs := make(chan int, 2*size)
	for i := range size {
		jobs <- i
		if i%10 == 0 {
			jobs <- i // delivered twice
		}
	}
	close(jobs)
	var dones atomic.Int64
	var last atomic.Pointer[Done]
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				var c Child
				if i%100 == 7 {
					c = Child{Failed: true, Reason: fmt.Sprintf("child %d failed", i)}
				} else {
					c = Child{Result: []byte(fmt.Sprint(i * i))}
				}
				done, err := s.Finish(ctx, refs(i), c)
				if !assert.NoError(t, err) {
					continue
				}
				if done != nil {
					dones.Add(1)
					last.Store(done)
				}
			}
		})
	}
	wg.Wait()
	require.GreaterOrEqual(t, dones.Load(), int64(1))
	done := last.Load()
	assert.Equal(t, Failed, done.Outcome)
	assert.Equal(t, size/100, done.Failed)
	assert.Equal(t, size-size/100, done.Succeeded)
	assert.Equal(t, []byte("4"), done.Children[2].Result)
	assert.Equal(t, sp.Then, done.Then)

	st, err := s.Status(ctx, "azurite")
	require.NoError(t, err)
	assert.True(t, st.Complete)
	assert.Equal(t, Failed, st.Outcome)
	assert.Equal(t, size/100, st.Failed)
	assert.Equal(t, "child 7 failed", st.Failures[0].Reason)

	require.NoError(t, s.Continued(ctx, "azurite"))
	again, err := s.Finish(ctx, refs(5), Child{})
	require.NoError(t, err)
	assert.Nil(t, again, "continued: a late duplicate reports nothing")
	require.NoError(t, s.Delete(ctx, "azurite"))
	_, err = s.Status(ctx, "azurite")
	require.ErrorIs(t, err, ErrNotFound, "deleted, shards and head")

	// Another group's last finish alone: its time is the few requests it
	// makes.
	small := spec("last", 3, OnSuccess)
	require.NoError(t, s.Create(ctx, small))
	for i := range 2 {
		_, err := s.Finish(ctx, small.Refs()(i), Child{})
		require.NoError(t, err)
	}
	start := time.Now()
	d, err := s.Finish(ctx, small.Refs()(2), Child{})
	require.NoError(t, err)
	require.NotNil(t, d)
	t.Logf("the last finish took %v; the group was completed by %d finishes", time.Since(start), dones.Load())
}
