// Package recordstest is the conformance suite of record stores: the
// payload store's blobs against Azurite, and the same store on memory blobs,
// pass the same tests, so that memqueue stands in for storage only where
// the two are checked to agree.
package recordstest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/records"
)

// Run checks a record store (the scheduler's state and the
// listener's marks of occurrences) against the contract both of the
// library's keep: the blobs of a payload store against Azurite, and
// memqueue's records in memory. store returns a store with no records
// named as the tests name theirs.
func Run(t *testing.T, store func(t *testing.T) records.Store) {
	t.Run("records/a create is refused once the record exists", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := store(t)
		_, err := s.Read(ctx, "r1")
		require.ErrorIs(t, err, records.ErrMissing)
		r := &records.Record{Kind: "schedule", Value: []byte(`{"a":1}`)}
		require.NoError(t, s.Write(ctx, "r1", r))
		assert.NotEmpty(t, r.Version)
		assert.False(t, r.Written.IsZero())
		err = s.Write(ctx, "r1", &records.Record{Kind: "schedule", Value: []byte(`{"a":2}`)})
		require.ErrorIs(t, err, records.ErrChanged)
		got, err := s.Read(ctx, "r1")
		require.NoError(t, err)
		assert.Equal(t, `{"a":1}`, string(got.Value))
		assert.Equal(t, "schedule", got.Kind)
		assert.Equal(t, r.Version, got.Version)
		assert.False(t, got.Now.Before(got.Written), "read after its write, on one clock")
	})
	t.Run("records/a replace needs the version read", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := store(t)
		first := &records.Record{Kind: "schedule", Value: []byte("1")}
		require.NoError(t, s.Write(ctx, "r2", first))
		stale := *first
		read, err := s.Read(ctx, "r2")
		require.NoError(t, err)
		read.Value = []byte("2")
		require.NoError(t, s.Write(ctx, "r2", read))
		assert.NotEqual(t, first.Version, read.Version)
		stale.Value = []byte("3")
		require.ErrorIs(t, s.Write(ctx, "r2", &stale), records.ErrChanged)
		require.ErrorIs(t, s.Write(ctx, "r-none", &records.Record{Kind: "schedule", Version: read.Version}), records.ErrChanged,
			"a replace of a record that does not exist")
		got, err := s.Read(ctx, "r2")
		require.NoError(t, err)
		assert.Equal(t, "2", string(got.Value))
	})
	t.Run("records/one of racing creates wins", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := store(t)
		var wg sync.WaitGroup
		results := make([]error, 8)
		for i := range results {
			wg.Go(func() {
				results[i] = s.Write(ctx, "r3", &records.Record{Kind: "once", Value: fmt.Appendf(nil, "%d", i), Life: time.Hour})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range results {
			if err == nil {
				won++
			} else {
				assert.ErrorIs(t, err, records.ErrChanged)
			}
		}
		assert.Equal(t, 1, won)
	})
	t.Run("records/the store's clock is the one it writes by", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		s := store(t)
		r := &records.Record{Kind: "schedule", Value: []byte("x")}
		require.NoError(t, s.Write(ctx, "r4", r))
		// Written is the store's time to its second (the service's
		// Last-Modified): Now, after the write, is not before it.
		assert.False(t, s.Now().Before(r.Written), "Now %v, written %v", s.Now(), r.Written)
		done := make(chan bool, 1)
		go func() { done <- s.Sleep(ctx, s.Now(), nil) }()
		assert.True(t, <-done, "a wake already due does not wait")
	})
}
