package wire

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestALineRoundTrips(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 12, 1, 9, 0, 0, 0, time.FixedZone("x", 3600))
	for _, l := range []DueLine{
		{At: at},
		{After: 400 * 86400, Hops: 3, Seen: 4},
	} {
		text := l.Encode() + `{"body":1}`
		got, rest, err := CutDue(text)
		require.NoError(t, err)
		assert.Equal(t, `{"body":1}`, rest)
		assert.True(t, got.At.Equal(l.At))
		assert.Equal(t, l.After, got.After)
		assert.Equal(t, l.Hops, got.Hops)
		assert.Equal(t, l.Seen, got.Seen)
	}
}

func TestDueCountsAfterFromInsertion(t *testing.T) {
	t.Parallel()
	in := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, in.Add(8*24*time.Hour), (&DueLine{After: 8 * 86400}).Due(in))
	at := in.Add(time.Hour)
	assert.Equal(t, at, (&DueLine{At: at}).Due(in.Add(-time.Hour)))
}

func TestTextWithoutALineIsUntouched(t *testing.T) {
	t.Parallel()
	l, rest, err := CutDue(`{"a":1}`)
	require.NoError(t, err)
	assert.Nil(t, l)
	assert.Equal(t, `{"a":1}`, rest)
}

func TestUnknownFieldsAreIgnored(t *testing.T) {
	t.Parallel()
	l, rest, err := CutDue(DueMagic + `{"after":9,"later":"x"}` + "\nbody")
	require.NoError(t, err)
	assert.Equal(t, int64(9), l.After)
	assert.Equal(t, "body", rest)
}

func TestMalformedLinesAreRefused(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		DueMagic + `{}` + "\n",
		DueMagic + `{"after":1,"at":"2026-01-01T00:00:00Z"}` + "\n",
		DueMagic + `{"after":-1}` + "\n",
		DueMagic + `{"after":99999999999}` + "\n",
		DueMagic + `{"after":1,"hops":-1}` + "\n",
		DueMagic + `{"after":1,"seen":-2}` + "\n",
		DueMagic + `{"after":1}`,
		DueMagic + `not json` + "\n",
		DueMagic + `{"after":1,"x":"` + strings.Repeat("a", MaxDueLine) + `"}` + "\n",
	} {
		_, rest, err := CutDue(text)
		assert.ErrorIs(t, err, ErrBadDueLine, "%q", text)
		assert.Equal(t, text, rest)
	}
}

// A field this version does not know survives a hop: the line is written
// back with it.
func TestUnknownFieldsSurviveAnEncode(t *testing.T) {
	t.Parallel()
	l, rest, err := CutDue(DueMagic + `{"after":864000,"future":"keep-me","n":[1,2]}` + "\nbody")
	require.NoError(t, err)
	l.Hops, l.Seen = 1, 1
	again, rest2, err := CutDue(l.Encode() + rest)
	require.NoError(t, err)
	assert.Equal(t, "body", rest2)
	assert.Equal(t, `"keep-me"`, string(again.extra["future"]))
	assert.Equal(t, `[1,2]`, string(again.extra["n"]))
	assert.Equal(t, int64(1), again.Hops)
	assert.Equal(t, DueMagic+`{"after":864000,"future":"keep-me","hops":1,"n":[1,2],"seen":1}`+"\n", l.Encode(), "keys sorted")
}
