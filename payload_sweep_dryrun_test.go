package azdispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/payload"
)

// A dry run judges payloads as a sweep would and reports what it would
// remove, and removes nothing; the real sweep after it removes just that.
func TestSweepDryRunDeletesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := testAccount(t, nil).PayloadStore(uniqueName(t))
	require.NoError(t, err)
	queue := uniqueName(t)
	put := func(ttl time.Duration, kind ...string) string {
		t.Helper()
		now := time.Now()
		meta := payload.Meta{Kind: payload.KindSingle, Queue: queue, Created: now, Expires: now.Add(ttl), Items: 1}
		if len(kind) > 0 {
			meta.Kind = kind[0]
		}
		p, err := store.put(ctx, meta, []byte("payload"))
		require.NoError(t, err)
		return p.Blob
	}
	orphan := put(time.Second)
	live := put(time.Hour)
	put(time.Hour, payload.KindBatch)

	time.Sleep(2100 * time.Millisecond) // the service's times have whole seconds
	dry, err := Sweep(ctx, store, &SweepOptions{Grace: time.Millisecond, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, SweepResult{Scanned: 3, Deleted: 1, Live: 2, DeletedBytes: 7, LiveBytes: 14, Batches: 1}, dry,
		"counts, bytes (\"payload\" each) and kinds")
	assert.False(t, blobGone(t, store, orphan), "a dry run deletes nothing")

	res, err := Sweep(ctx, store, &SweepOptions{Grace: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, dry, res, "the sweep removes what the dry run reported")
	assert.True(t, blobGone(t, store, orphan))
	assert.False(t, blobGone(t, store, live))
}
