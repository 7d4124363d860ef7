package payload

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metaNames are the metadata names ParseMeta reads, in the order of
// FuzzParseMeta's values.
var metaNames = [...]string{metaKind, metaQueue, metaCreated, metaExpires, metaItems, metaDone, metaPoisoned}

// FuzzParseMeta feeds ParseMeta blob metadata, which anyone who can write to
// the container writes: the seven names, each present or not, in lower or
// upper case, with a value or none (nil). A blob marked poisoned stays
// marked, which keeps Sweep off it; what parses writes back (ToMap) to the
// same metadata, times to the second, unless a time cannot be written in
// RFC 3339 once in UTC, and then it parses no more: such a blob is foreign,
// and never swept.
func FuzzParseMeta(f *testing.F) {
	const all = 1<<len(metaNames) - 1
	add := func(shape uint32, values ...string) {
		f.Add(shape, values[0], values[1], values[2], values[3], values[4], values[5], values[6])
	}
	add(all, KindBatch, "orders", "2024-05-06T07:08:09Z", "2024-05-13T07:08:09Z", "1000", "0-499,502", "2024-05-06T07:09:09Z")
	add(all&^(1<<6), KindSingle, "big", "2024-05-06T07:08:09Z", "never", "1", "", "")
	add(all|all<<7, KindBatch, "q", "2024-05-06T07:08:09.999999999+01:00", "never", "+7", "1", "garbled") // upper-case names
	add(all, KindBatch, "q", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "-3", "", "0001-01-01T00:00:00Z")
	add(all, KindBatch, "q", "0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59-23:59", "1", "", "")
	add(all|1<<14, KindBatch, "q", "2024-05-06T07:08:09Z", "never", "1", "", "") // kind with no value
	add(all, "stream", "q", "2024-05-06T07:08:09Z", "never", "1", "", "")
	add(all, KindBatch, "q", "yesterday", "soon", "many", "", "")
	add(0, "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, shape uint32, kind, queue, created, expires, items, done, poisoned string) {
		t.Parallel()
		values := [...]string{kind, queue, created, expires, items, done, poisoned}
		mp := map[string]*string{"owner": &values[0]} // a name of someone else's
		lower := map[string]*string{}
		for i, name := range metaNames {
			if shape&(1<<i) == 0 {
				continue
			}
			v := &values[i]
			if shape&(1<<(14+i)) != 0 {
				v = nil
			}
			lower[name] = v
			if shape&(1<<(7+i)) != 0 {
				name = strings.ToUpper(name)
			}
			mp[name] = v
		}
		m, ok := ParseMeta(mp)
		lm, lok := ParseMeta(lower)
		require.Equal(t, lok, ok, "names match in any case")
		if !ok {
			return
		}
		assertSameMeta(t, lm, m)
		assert.Contains(t, []string{KindBatch, KindSingle}, m.Kind)
		if v, ok := lower[metaPoisoned]; ok && v != nil {
			assert.False(t, m.Poisoned.IsZero(), "a poisoned marker %q must keep the blob", *v)
		}

		back, ok := ParseMeta(m.ToMap())
		if !writable(m.Created) || !writable(m.Expires) || !writable(m.Poisoned) {
			assert.False(t, ok, "%+v wrote %v", m, m.ToMap())
			return
		}
		require.True(t, ok, "%+v wrote %v", m, m.ToMap())
		want := m
		want.Created, want.Expires, want.Poisoned = toSecond(m.Created), toSecond(m.Expires), toSecond(m.Poisoned)
		assertSameMeta(t, want, back)
	})
}

// writable reports whether t can be written in RFC 3339 once in UTC (a
// four-digit year). The zero time means no time for Expires and Poisoned,
// and is written.
func writable(t time.Time) bool {
	y := t.UTC().Year()
	return t.IsZero() || y >= 0 && y <= 9999
}

// toSecond is t as ToMap writes it: to the second, in UTC.
func toSecond(t time.Time) time.Time { return t.Truncate(time.Second).UTC() }

// assertSameMeta checks that got is want, with times at the same instant.
func assertSameMeta(t *testing.T, want, got Meta) {
	t.Helper()
	for _, tm := range []struct {
		name      string
		want, got time.Time
	}{{"Created", want.Created, got.Created}, {"Expires", want.Expires, got.Expires}, {"Poisoned", want.Poisoned, got.Poisoned}} {
		assert.True(t, tm.want.Equal(tm.got), "%s: want %v, got %v", tm.name, tm.want, tm.got)
	}
	want.Created, want.Expires, want.Poisoned = got.Created, got.Expires, got.Poisoned
	assert.Equal(t, want, got)
}

// A poisoned marker that reads as the zero time, or that does not parse on
// a blob created at the zero time, still marks the blob: otherwise Sweep
// would delete a payload that a poison envelope still points at.
func TestParseMetaKeepsAZeroPoisonedMarker(t *testing.T) {
	t.Parallel()
	zero := "0001-01-01T00:00:00Z"
	for _, tt := range []struct{ created, poisoned string }{
		{"2024-05-06T07:08:09Z", zero},
		{zero, zero},
		{zero, "garbled"},
	} {
		mp := (&Meta{Kind: KindBatch, Queue: "q", Items: 2}).ToMap()
		mp[metaCreated], mp[metaPoisoned] = &tt.created, &tt.poisoned
		got, ok := ParseMeta(mp)
		require.True(t, ok)
		assert.False(t, got.Poisoned.IsZero(), "created %s, poisoned %s", tt.created, tt.poisoned)
		again, ok := ParseMeta(got.ToMap())
		require.True(t, ok)
		assert.False(t, again.Poisoned.IsZero(), "the marker is written back")
	}
}
