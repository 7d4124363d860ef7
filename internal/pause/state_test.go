package pause

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAPauseRoundTripsThroughItsMetadata(t *testing.T) {
	s := State{Until: time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC), Since: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), By: "ops: Zoë & co=1"}
	other := "kept"
	md := With(map[string]*string{"Owner": &other, "AZDISPATCH_PAUSE": &other}, s)
	require.Len(t, md, 2, "the old entry, in another case, is replaced")
	assert.Equal(t, "kept", *md["Owner"])
	for _, r := range *md[MetadataName] {
		assert.Less(t, r, rune(128), "a header value is ASCII")
	}
	got, err := Read(md)
	require.NoError(t, err)
	assert.Equal(t, s, got)
	assert.True(t, got.ActiveAt(s.Until.Add(-time.Second)))
	assert.False(t, got.ActiveAt(s.Until))

	cleared := With(md, State{})
	assert.Len(t, cleared, 1)
	none, err := Read(cleared)
	require.NoError(t, err)
	assert.False(t, none.ActiveAt(s.Since))
}

func TestAPauseEntryNotOursIsRefused(t *testing.T) {
	for _, v := range []string{"", "until=tomorrow", "%zz", strings.Repeat("a", maxValue+1),
		"until=2026-11-28T13:00:00Z&by=" + strings.Repeat("x", MaxBy+1), "until=2026-11-28T13:00:00Z&since=" + strings.Repeat("\xff", 5000)} {
		_, err := Parse(v)
		require.ErrorIs(t, err, ErrMalformed, "%.40q", v)
		assert.Less(t, len(err.Error()), 200, "an error quotes a bounded part of what it read")
	}
}
