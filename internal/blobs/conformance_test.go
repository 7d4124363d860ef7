package blobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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

// containers numbers the containers of this test binary: each check has
// its own.
var containers atomic.Int64

func containerName() string {
	return fmt.Sprintf("conformance-%d-%d", time.Now().UnixNano()%1e9, containers.Add(1))
}

// TestConformanceAzure checks the Azure backend against Azurite with the
// checks the memory backend passes (TestConformanceMemory).
func TestConformanceAzure(t *testing.T) {
	t.Parallel()
	azurite.SkipIfShort(t)
	emulator := azurite.ForTest(t)
	run(t, func(t *testing.T) blobs.Backend {
		name := containerName()
		c, err := container.NewClientFromConnectionString(emulator.ConnectionString(), name, nil)
		require.NoError(t, err)
		return blobs.NewAzure(c, name, nil)
	})
}

// TestConformanceMemory checks the memory backend with the checks the
// Azure backend passes against Azurite (TestConformanceAzure).
func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	run(t, func(*testing.T) blobs.Backend { return blobs.NewMemory(containerName(), nil, nil) })
}

// run checks a backend: newBackend returns one on an empty container that
// may not exist yet.
func run(t *testing.T, newBackend func(t *testing.T) blobs.Backend) {
	ctx := context.Background()
	write := func(data string, meta map[string]string) blobs.Write {
		return blobs.Write{Data: []byte(data), Metadata: meta, ContentType: "application/json"}
	}
	t.Run("a create makes the container, and a second create conflicts", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		first, err := b.Create(ctx, "a", write("1", map[string]string{"kind": "x"}))
		require.NoError(t, err)
		assert.NotEmpty(t, first.ETag)
		assert.False(t, first.Date.IsZero(), "the answer's Date")
		_, err = b.Create(ctx, "a", write("2", nil))
		require.ErrorIs(t, err, blobs.ErrConflict)
		assert.NotErrorIs(t, err, blobs.ErrNotFound)
		body, info, err := b.Read(ctx, "a")
		require.NoError(t, err)
		data, err := io.ReadAll(body)
		require.NoError(t, body.Close())
		require.NoError(t, err)
		assert.Equal(t, "1", string(data), "the first write stands")
		assert.Equal(t, first.ETag, info.ETag)
	})
	t.Run("a replace needs the ETag read", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		first, err := b.Create(ctx, "r", write("1", nil))
		require.NoError(t, err)
		second, err := b.Replace(ctx, "r", write("2", nil), first.ETag)
		require.NoError(t, err)
		assert.NotEqual(t, first.ETag, second.ETag)
		_, err = b.Replace(ctx, "r", write("3", nil), first.ETag)
		require.ErrorIs(t, err, blobs.ErrConflict, "a stale ETag")
		_, err = b.Replace(ctx, "none", write("3", nil), first.ETag)
		require.ErrorIs(t, err, blobs.ErrConflict, "a replace of nothing")
		_, err = b.SetMetadata(ctx, "r", map[string]string{"k": "v"}, first.ETag)
		require.ErrorIs(t, err, blobs.ErrConflict, "a metadata update with a stale ETag")
		updated, err := b.SetMetadata(ctx, "r", map[string]string{"k": "v"}, second.ETag)
		require.NoError(t, err)
		body, info, err := b.Read(ctx, "r")
		require.NoError(t, err)
		data, _ := io.ReadAll(body)
		require.NoError(t, body.Close())
		assert.Equal(t, "2", string(data), "a metadata update keeps the content")
		assert.Equal(t, updated.ETag, info.ETag)
		_, err = b.SetMetadata(ctx, "none", nil, "")
		assert.ErrorIs(t, err, blobs.ErrNotFound)
	})
	t.Run("metadata, size and times round-trip", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		meta := map[string]string{"kind": "single", "queue": "orders", "writer": "abc123"}
		written, err := b.Create(ctx, "m", write("hello", meta))
		require.NoError(t, err)
		info, err := b.Properties(ctx, "m")
		require.NoError(t, err)
		assert.Equal(t, meta, info.Metadata)
		assert.Equal(t, int64(5), info.Size)
		assert.Equal(t, written.ETag, info.ETag)
		assert.False(t, info.Modified.IsZero())
		assert.False(t, info.Date.Before(info.Modified), "read after its write, on one clock")
		assert.Equal(t, info.Modified, info.Modified.Truncate(time.Second), "Last-Modified to the second")
		_, err = b.Properties(ctx, "none")
		assert.ErrorIs(t, err, blobs.ErrNotFound)
		_, _, err = b.Read(ctx, "none")
		assert.ErrorIs(t, err, blobs.ErrNotFound)
	})
	t.Run("a delete is conditional on the ETag, if given", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		first, err := b.Create(ctx, "d", write("1", nil))
		require.NoError(t, err)
		second, err := b.Replace(ctx, "d", write("2", nil), first.ETag)
		require.NoError(t, err)
		_, err = b.Delete(ctx, "d", first.ETag)
		require.ErrorIs(t, err, blobs.ErrConflict)
		deleted, err := b.Delete(ctx, "d", second.ETag)
		require.NoError(t, err)
		assert.False(t, deleted.Date.IsZero())
		_, err = b.Delete(ctx, "d", "")
		require.ErrorIs(t, err, blobs.ErrNotFound)
		_, err = b.Create(ctx, "e", write("1", nil))
		require.NoError(t, err)
		_, err = b.Delete(ctx, "e", "")
		require.NoError(t, err, "an unconditional delete")
	})
	t.Run("a listing by prefix carries metadata and the answer's Date", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		require.NoError(t, b.List(ctx, "", func([]blobs.Info, time.Time) error {
			return errors.New("a missing container lists nothing")
		}))
		for _, name := range []string{"p-2", "p-1", "q-1"} {
			_, err := b.Create(ctx, name, write(name, map[string]string{"name": name}))
			require.NoError(t, err)
		}
		var got []blobs.Info
		var date time.Time
		require.NoError(t, b.List(ctx, "p-", func(page []blobs.Info, d time.Time) error {
			got, date = append(got, page...), d
			return nil
		}))
		require.Len(t, got, 2)
		assert.Equal(t, "p-1", got[0].Name)
		assert.Equal(t, "p-2", got[1].Name)
		assert.Equal(t, map[string]string{"name": "p-1"}, got[0].Metadata)
		assert.Equal(t, int64(3), got[0].Size)
		assert.NotEmpty(t, got[0].ETag)
		assert.False(t, got[0].Created.IsZero())
		assert.False(t, date.IsZero())
		stop := errors.New("stop")
		assert.ErrorIs(t, b.List(ctx, "", func([]blobs.Info, time.Time) error { return stop }), stop)
	})
	t.Run("a listing says which blobs are leased", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		const id = "9d3b7a52-0000-4000-8000-000000000003"
		for _, name := range []string{"l/held", "l/free", "l/released"} {
			_, err := b.Create(ctx, name, write("", nil))
			require.NoError(t, err)
		}
		_, err := b.AcquireLease(ctx, "l/held", id, 15*time.Second)
		require.NoError(t, err)
		_, err = b.AcquireLease(ctx, "l/released", id, 15*time.Second)
		require.NoError(t, err)
		_, err = b.ReleaseLease(ctx, "l/released", id)
		require.NoError(t, err)
		leased := map[string]bool{}
		require.NoError(t, b.List(ctx, "l/", func(page []blobs.Info, _ time.Time) error {
			for _, info := range page {
				leased[info.Name] = info.Leased
			}
			return nil
		}))
		assert.Equal(t, map[string]bool{"l/held": true, "l/free": false, "l/released": false}, leased)
	})
	t.Run("creating the container twice is fine", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		require.NoError(t, b.CreateContainer(ctx))
		require.NoError(t, b.CreateContainer(ctx))
	})
	t.Run("a lease is one holder's; its holder takes it again, renews and releases it", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		const mine, theirs = "9d3b7a52-0000-4000-8000-000000000001", "9d3b7a52-0000-4000-8000-000000000002"
		_, err := b.AcquireLease(ctx, "k", mine, 15*time.Second)
		require.ErrorIs(t, err, blobs.ErrNotFound, "a missing blob has no lease")
		_, err = b.Create(ctx, "k", write("", nil))
		require.NoError(t, err)
		got, err := b.AcquireLease(ctx, "k", mine, 15*time.Second)
		require.NoError(t, err)
		assert.False(t, got.Date.IsZero(), "the answer's Date")
		_, err = b.AcquireLease(ctx, "k", mine, 15*time.Second)
		require.NoError(t, err, "an acquire tried again, its answer lost, recognises its own lease")
		_, err = b.AcquireLease(ctx, "k", theirs, 15*time.Second)
		require.ErrorIs(t, err, blobs.ErrLeased)
		_, err = b.RenewLease(ctx, "k", theirs)
		require.ErrorIs(t, err, blobs.ErrLeased, "only its holder renews it")
		_, err = b.ReleaseLease(ctx, "k", theirs)
		require.NoError(t, err, "theirs holds nothing to give up")
		_, err = b.AcquireLease(ctx, "k", theirs, 15*time.Second)
		require.ErrorIs(t, err, blobs.ErrLeased, "only its holder releases it")
		_, err = b.Delete(ctx, "k", "")
		require.ErrorIs(t, err, blobs.ErrLeased, "a leased blob is not deleted without its lease")
		_, err = b.SetMetadata(ctx, "k", map[string]string{"a": "1"}, "")
		require.ErrorIs(t, err, blobs.ErrLeased, "nor written without it")
		_, err = b.SetLeasedMetadata(ctx, "k", map[string]string{"a": "1"}, theirs)
		require.ErrorIs(t, err, blobs.ErrLeased, "nor under another's")
		_, err = b.SetLeasedMetadata(ctx, "k", map[string]string{"a": "2"}, mine)
		require.NoError(t, err, "its holder writes it")
		props, err := b.Properties(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"a": "2"}, props.Metadata)
		_, err = b.RenewLease(ctx, "k", mine)
		require.NoError(t, err, "a write keeps the lease")
		_, err = b.RenewLease(ctx, "k", mine)
		require.NoError(t, err)
		_, err = b.ReleaseLease(ctx, "k", mine)
		require.NoError(t, err)
		_, err = b.ReleaseLease(ctx, "k", mine)
		require.NoError(t, err, "a release tried again, its answer lost")
		_, err = b.AcquireLease(ctx, "k", theirs, 15*time.Second)
		require.NoError(t, err, "released: another takes it at once")
		_, err = b.RenewLease(ctx, "k", mine)
		require.ErrorIs(t, err, blobs.ErrLeased, "a lease lost is not renewed")
		_, err = b.SetLeasedMetadata(ctx, "k", map[string]string{"a": "3"}, mine)
		require.ErrorIs(t, err, blobs.ErrLeased, "nor written under")
	})
	t.Run("an append blob counts its blocks, however many writers append at once", func(t *testing.T) {
		t.Parallel()
		b := newBackend(t)
		_, err := b.Append(ctx, "tally", []byte("x"))
		require.ErrorIs(t, err, blobs.ErrNotFound, "no blob yet (nor a container)")
		created, err := b.CreateAppend(ctx, "tally", map[string]string{"Kind": "tally"})
		require.NoError(t, err, "makes the container too")
		assert.NotEmpty(t, created.ETag)
		assert.False(t, created.Date.IsZero(), "the answer carries the service's time")
		_, err = b.CreateAppend(ctx, "tally", nil)
		require.ErrorIs(t, err, blobs.ErrConflict, "a second create conflicts")

		const writers = 16
		counts := make(chan int, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				info, err := b.Append(ctx, "tally", []byte(fmt.Sprintf("%02d;", i)))
				assert.NoError(t, err)
				assert.False(t, info.Date.IsZero())
				counts <- info.Blocks
			})
		}
		wg.Wait()
		close(counts)
		var seen []int
		for c := range counts {
			seen = append(seen, c)
		}
		// The service tells each append the count its own block made;
		// the emulator reads the count around its append, so racing
		// appends may be told the same count, earlier or later (seen:
		// 1, 2, 2, 3, 5, … and 1, 1, 2, …). What a group's finish relies
		// on holds on both: no count is more than the blocks there are,
		// and one append is told all, so that some finish reads the blob.
		slices.Sort(seen)
		require.Len(t, seen, writers)
		assert.GreaterOrEqual(t, seen[0], 1)
		assert.Equal(t, writers, seen[writers-1], "one of them is told all, and none more")

		_, err = b.SetMetadata(ctx, "tally", map[string]string{"kind": "tally", "done": "yes"}, "")
		require.NoError(t, err)
		info, err := b.Append(ctx, "tally", []byte("last;"))
		require.NoError(t, err, "an append blob stays one when its metadata changes")
		assert.Equal(t, writers+1, info.Blocks)

		r, props, err := b.Read(ctx, "tally")
		require.NoError(t, err)
		data, err := io.ReadAll(r)
		require.NoError(t, r.Close())
		require.NoError(t, err)
		assert.Equal(t, int64(len(data)), props.Size)
		assert.Equal(t, map[string]string{"kind": "tally", "done": "yes"}, props.Metadata)
		blocks := strings.Split(strings.TrimSuffix(string(data), ";"), ";")
		assert.Len(t, blocks, writers+1, "blocks are kept whole")
		assert.Equal(t, "last", blocks[writers], "and in the order their answers came")

		_, err = b.Create(ctx, "plain", write("1", nil))
		require.NoError(t, err)
		_, err = b.Append(ctx, "plain", []byte("2"))
		require.Error(t, err, "a block blob takes no append")
		assert.NotErrorIs(t, err, blobs.ErrNotFound)
	})
}
