package payload

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetaRoundTrips(t *testing.T) {
	t.Parallel()
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	tests := []struct {
		name string
		meta Meta
	}{
		{"a batch in progress", Meta{Kind: KindBatch, Queue: "orders", Created: created, Expires: created.Add(7 * 24 * time.Hour), Items: 1000, Done: "0-499,502"}},
		{"a single that never expires", Meta{Kind: KindSingle, Queue: "big", Created: created, Items: 1}},
		{"poisoned", Meta{Kind: KindBatch, Queue: "q", Created: created, Expires: created.Add(time.Hour), Items: 3, Poisoned: created.Add(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseMeta(tt.meta.ToMap())
			require.True(t, ok)
			assert.Equal(t, tt.meta, got)
		})
	}
}

func TestMetaToMapWritesNeverForNoExpiry(t *testing.T) {
	t.Parallel()
	m := Meta{Kind: KindSingle, Queue: "q", Created: time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 3600)), Items: 1}
	mp := m.ToMap()
	require.Contains(t, mp, "expires")
	assert.Equal(t, "never", *mp["expires"])
	assert.Equal(t, "2024-05-06T06:08:09Z", *mp["created"], "RFC 3339 in UTC")
	assert.NotContains(t, mp, "done", "no checkpoint, no entry")
	assert.NotContains(t, mp, "poisoned", "not poisoned, no entry")
}

func TestParseMetaMatchesNamesInAnyCase(t *testing.T) {
	t.Parallel()
	m := Meta{Kind: KindBatch, Queue: "q", Created: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC), Items: 2, Done: "1"}
	mp := map[string]*string{}
	for k, v := range m.ToMap() {
		mp[strings.ToUpper(k[:1])+k[1:]] = v
	}
	got, ok := ParseMeta(mp)
	require.True(t, ok)
	assert.Equal(t, m, got)
}

func TestParseMetaRefusesForeignMetadata(t *testing.T) {
	t.Parallel()
	valid := Meta{Kind: KindBatch, Queue: "q", Created: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC), Items: 2}
	str := func(s string) *string { return &s }
	with := func(k string, v *string) map[string]*string {
		mp := valid.ToMap()
		mp[k] = v
		return mp
	}
	without := func(k string) map[string]*string {
		mp := valid.ToMap()
		delete(mp, k)
		return mp
	}
	tests := map[string]map[string]*string{
		"nil":            nil,
		"someone else's": {"owner": str("team-a"), "purpose": str("backup")},
		"no kind":        without("kind"),
		"nil kind":       with("kind", nil),
		"other kind":     with("kind", str("stream")),
		"no created":     without("created"),
		"bad created":    with("created", str("yesterday")),
		"no expires":     without("expires"),
		"bad expires":    with("expires", str("soon")),
		"no items":       without("items"),
		"bad items":      with("items", str("many")),
	}
	for name, mp := range tests {
		_, ok := ParseMeta(mp)
		assert.False(t, ok, name)
	}
}

func TestParseMetaKeepsAPoisonedMarkerThatDoesNotParse(t *testing.T) {
	t.Parallel()
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	mp := (&Meta{Kind: KindBatch, Queue: "q", Created: created, Items: 2}).ToMap()
	bad := "garbled"
	mp["poisoned"] = &bad
	got, ok := ParseMeta(mp)
	require.True(t, ok)
	assert.Equal(t, created, got.Poisoned, "a marker that does not parse still marks: keeping is the safe side")
}
