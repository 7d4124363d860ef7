package azdispatch

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFramesRoundTripAnyText(t *testing.T) {
	t.Parallel()
	items := []string{"", "plain", "line1\nline2\n", "12\n", `{"n":1}`, "ünïcödé 𝄞", strings.Repeat("x", 70000)}
	w := newFrameWriter(defaultLimits(t))
	for _, it := range items {
		require.NoError(t, w.add(it))
	}
	data, err := w.finish()
	require.NoError(t, err)
	require.NoError(t, scanFrames(data, len(items), defaultLimits(t)))
	assert.ErrorIs(t, scanFrames(data, len(items)+1, defaultLimits(t)), ErrPayloadCorrupt)
	assert.ErrorIs(t, scanFrames(data, len(items)-1, defaultLimits(t)), ErrPayloadCorrupt)

	fr, err := newFrameReader(data, defaultLimits(t))
	require.NoError(t, err)
	for _, want := range items {
		got, err := fr.next(false)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err = fr.next(false)
	assert.Equal(t, io.EOF, err)
}

func TestFrameWriterEnforcesTheLimits(t *testing.T) {
	t.Parallel()
	w := newFrameWriter(PayloadLimits{MaxBlobSize: 1 << 20, MaxExpandedSize: 100, MaxItemSize: 10, MaxItems: 2})
	assert.ErrorIs(t, w.add(strings.Repeat("x", 11)), ErrPayloadTooLarge, "item size")
	require.NoError(t, w.add("a"))
	require.NoError(t, w.add("b"))
	assert.ErrorIs(t, w.add("c"), ErrPayloadTooLarge, "item count")

	w = newFrameWriter(PayloadLimits{MaxBlobSize: 1 << 20, MaxExpandedSize: 50, MaxItemSize: 10, MaxItems: 100})
	for range 2 {
		require.NoError(t, w.add("0123456789"))
	}
	assert.ErrorIs(t, w.add("0123456789"), ErrPayloadTooLarge, "expanded size")

	w = newFrameWriter(PayloadLimits{MaxBlobSize: 20, MaxExpandedSize: 1 << 20, MaxItemSize: 1 << 20, MaxItems: 100})
	require.NoError(t, w.add(strings.Repeat("incompressible?", 10)))
	_, err := w.finish()
	assert.ErrorIs(t, err, ErrPayloadTooLarge, "blob size")
}

// gzipped compresses raw as a payload blob would be, with no checks.
func gzipped(t testing.TB, raw string) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	_, err := io.WriteString(gz, raw)
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return b.Bytes()
}

func TestFrameReaderRefusesCorruptAndOversizedPayloads(t *testing.T) {
	t.Parallel()
	lim := PayloadLimits{MaxBlobSize: 1 << 20, MaxExpandedSize: 1 << 20, MaxItemSize: 100, MaxItems: 10}
	cases := map[string]struct {
		data []byte
		want error
	}{
		"not gzip":         {[]byte("plain text"), ErrPayloadCorrupt},
		"no header":        {gzipped(t, "2\nab"), ErrPayloadCorrupt},
		"bad length":       {gzipped(t, framesHeader+"x\nab"), ErrPayloadCorrupt},
		"negative length":  {gzipped(t, framesHeader+"-1\n"), ErrPayloadCorrupt},
		"long length line": {gzipped(t, framesHeader+strings.Repeat("1", 40)+"\n"), ErrPayloadCorrupt},
		"truncated item":   {gzipped(t, framesHeader+"5\nab"), ErrPayloadCorrupt},
		"truncated line":   {gzipped(t, framesHeader+"2\nab3"), ErrPayloadCorrupt},
		"trailing garbage": {append(gzipped(t, framesHeader+"2\nab"), "junk"...), ErrPayloadCorrupt},
		"item too large":   {gzipped(t, framesHeader+"101\n"+strings.Repeat("a", 101)), ErrPayloadTooLarge},
		// 2 MiB of zeros in a few KiB: the reader stops at 1 MiB.
		"gzip bomb": {gzipped(t, framesHeader+"2097152\n"+strings.Repeat("\x00", 2<<20)), ErrPayloadTooLarge},
	}
	for name, c := range cases {
		err := scanFrames(c.data, 1, lim)
		assert.ErrorIs(t, err, c.want, name)
	}
	bomb := gzipped(t, framesHeader+strings.Repeat("99\n"+strings.Repeat("\x00", 99), 20_000))
	assert.Less(t, len(bomb), 64<<10, "the bomb is small")
	assert.ErrorIs(t, scanFrames(bomb, 20_000, PayloadLimits{MaxBlobSize: 1 << 20, MaxExpandedSize: 1 << 20, MaxItemSize: 100, MaxItems: 1 << 20}), ErrPayloadTooLarge)
}
