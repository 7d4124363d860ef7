package azdispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/blobs"
	"github.com/azdispatch/azdispatch/internal/payload"
)

func TestSweepDueReadsTheServiceClock(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	// A publisher whose clock ran 5 hours slow wrote a payload for a
	// message with an hour to live.
	slow := payload.Meta{Created: at("2030-01-01T07:00:00Z"), Expires: at("2030-01-01T08:00:00Z")}
	written := blobs.Info{Created: at("2030-01-01T12:00:00Z"), Modified: at("2030-01-01T12:30:00Z")}
	for _, c := range []struct {
		name  string
		meta  payload.Meta
		props blobs.Info
		now   time.Time
		due   bool
	}{
		{"live by the service's clock", slow, written, at("2030-01-01T12:59:00Z"), false},
		{"expired plus grace by the service's clock", slow, written, at("2030-01-01T13:05:00Z"), true},
		{"within grace", slow, written, at("2030-01-01T13:00:30Z"), false},
		{"due at the very moment", slow, written, at("2030-01-01T13:01:00Z"), true},
		{"Last-Modified stands in for a missing creation time", slow,
			blobs.Info{Modified: at("2030-01-01T12:30:00Z")}, at("2030-01-01T13:01:00Z"), false},
		{"no time written: kept", slow, blobs.Info{}, at("2031-01-01T00:00:00Z"), false},
		{"no Date on the listing: kept", slow, written, time.Time{}, false},
		{"never expires", payload.Meta{Created: slow.Created}, written, at("2031-01-01T00:00:00Z"), false},
		{"expires before it was created: kept", payload.Meta{Created: slow.Expires, Expires: slow.Created}, written, at("2031-01-01T00:00:00Z"), false},
	} {
		assert.Equal(t, c.due, sweepDue(c.meta, c.props, c.now, time.Minute), c.name)
	}
}

// Payloads written by publishers whose clocks are far off are judged by the
// service's clock: one a slow clock says expired hours ago is kept while the
// service says its message lives; one a fast clock says lives for hours is
// deleted once the service says its message is gone.
func TestSweepIgnoresThePublishersClockSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := testAccount(t, nil).PayloadStore(uniqueName(t))
	require.NoError(t, err)
	queue := uniqueName(t)
	put := func(created time.Time, ttl time.Duration) string {
		t.Helper()
		meta := payload.Meta{Kind: payload.KindSingle, Queue: queue, Created: created, Expires: created.Add(ttl), Items: 1}
		p, err := store.put(ctx, meta, []byte("payload"))
		require.NoError(t, err)
		return p.Blob
	}
	now := time.Now()
	slow := put(now.Add(-5*time.Hour), time.Hour)  // expired 4 hours ago by its writer's clock
	fast := put(now.Add(3*time.Hour), time.Second) // 3 hours to go by its writer's clock

	time.Sleep(2100 * time.Millisecond) // the service's times have whole seconds
	res, err := Sweep(ctx, store, &SweepOptions{Grace: time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, SweepResult{Scanned: 2, Deleted: 1, Live: 1}, sweepCounts(res))
	assert.False(t, blobGone(t, store, slow), "its message lives for another hour by the service's clock")
	assert.True(t, blobGone(t, store, fast), "its message expired a second after it was written, by the service's clock")
}

// sweepCounts is r with its counts only: without bytes and kinds.
func sweepCounts(r SweepResult) SweepResult {
	r.DeletedBytes, r.LiveBytes, r.PoisonedBytes, r.Batches, r.Records = 0, 0, 0, 0, 0
	return r
}
