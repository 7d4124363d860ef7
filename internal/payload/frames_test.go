package payload

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"
)

func TestFramesRoundTripAnyText(t *testing.T) {
	t.Parallel()
	items := []string{"", "plain", "line1\nline2\n", "12\n", `{"n":1}`, "ünïcödé 𝄞", strings.Repeat("x", 70000)}
	w := NewWriter(defaultLimits(t))
	for _, it := range items {
		require.NoError(t, w.Add(it))
	}
	assert.Equal(t, len(items), w.Items())
	data, err := w.Finish()
	require.NoError(t, err)
	largest, err := Scan(data, len(items), defaultLimits(t))
	require.NoError(t, err)
	assert.Equal(t, 70000, largest, "the largest item's size")
	assert.ErrorIs(t, scanErr(data, len(items)+1, defaultLimits(t)), ErrCorrupt)
	assert.ErrorIs(t, scanErr(data, len(items)-1, defaultLimits(t)), ErrCorrupt)

	fr, err := NewReader(data, defaultLimits(t))
	require.NoError(t, err)
	for _, want := range items {
		got, err := fr.Next(false)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err = fr.Next(false)
	assert.Equal(t, io.EOF, err)
}

func TestWriterEnforcesTheLimits(t *testing.T) {
	t.Parallel()
	w := NewWriter(Limits{MaxBlobSize: 1 << 20, MaxExpandedSize: 100, MaxItemSize: 10, MaxItems: 2})
	assert.ErrorIs(t, w.Add(strings.Repeat("x", 11)), ErrTooLarge, "item size")
	require.NoError(t, w.Add("a"))
	require.NoError(t, w.Add("b"))
	assert.ErrorIs(t, w.Add("c"), ErrTooLarge, "item count")
	assert.Equal(t, 2, w.Items(), "a refused item is not added")

	w = NewWriter(Limits{MaxBlobSize: 1 << 20, MaxExpandedSize: 50, MaxItemSize: 10, MaxItems: 100})
	for range 2 {
		require.NoError(t, w.Add("0123456789"))
	}
	assert.ErrorIs(t, w.Add("0123456789"), ErrTooLarge, "expanded size")

	w = NewWriter(Limits{MaxBlobSize: 20, MaxExpandedSize: 1 << 20, MaxItemSize: 1 << 20, MaxItems: 100})
	require.NoError(t, w.Add(strings.Repeat("incompressible?", 10)))
	_, err := w.Finish()
	assert.ErrorIs(t, err, ErrTooLarge, "blob size")
}

// gzipped compresses raw as a payload blob would be, with no checks.
func gzipped(t testing.TB, raw string) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	_, err := io.WriteString(gz, raw)
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return b.Bytes()
}

func TestReaderRefusesCorruptAndOversizedPayloads(t *testing.T) {
	t.Parallel()
	lim := Limits{MaxBlobSize: 1 << 20, MaxExpandedSize: 1 << 20, MaxItemSize: 100, MaxItems: 10}
	cases := map[string]struct {
		data []byte
		want error
	}{
		"not gzip":         {[]byte("plain text"), ErrCorrupt},
		"no header":        {gzipped(t, "2\nab"), ErrCorrupt},
		"bad length":       {gzipped(t, wire.ItemsMagic+"x\nab"), ErrCorrupt},
		"negative length":  {gzipped(t, wire.ItemsMagic+"-1\n"), ErrCorrupt},
		"long length line": {gzipped(t, wire.ItemsMagic+strings.Repeat("1", 40)+"\n"), ErrCorrupt},
		"truncated item":   {gzipped(t, wire.ItemsMagic+"5\nab"), ErrCorrupt},
		"truncated line":   {gzipped(t, wire.ItemsMagic+"2\nab3"), ErrCorrupt},
		"trailing garbage": {append(gzipped(t, wire.ItemsMagic+"2\nab"), "junk"...), ErrCorrupt},
		"item too large":   {gzipped(t, wire.ItemsMagic+"101\n"+strings.Repeat("a", 101)), ErrTooLarge},
		// 2 MiB of zeros in a few KiB: the reader stops at 1 MiB.
		"gzip bomb": {gzipped(t, wire.ItemsMagic+"2097152\n"+strings.Repeat("\x00", 2<<20)), ErrTooLarge},
	}
	for name, c := range cases {
		err := scanErr(c.data, 1, lim)
		assert.ErrorIs(t, err, c.want, name)
	}
	bomb := gzipped(t, wire.ItemsMagic+strings.Repeat("99\n"+strings.Repeat("\x00", 99), 20_000))
	assert.Less(t, len(bomb), 64<<10, "the bomb is small")
	assert.ErrorIs(t, scanErr(bomb, 20_000, Limits{MaxBlobSize: 1 << 20, MaxExpandedSize: 1 << 20, MaxItemSize: 100, MaxItems: 1 << 20}), ErrTooLarge)
}

func TestSingleText(t *testing.T) {
	t.Parallel()
	payload := func(t *testing.T, items ...string) []byte {
		t.Helper()
		w := NewWriter(defaultLimits(t))
		for _, it := range items {
			require.NoError(t, w.Add(it))
		}
		data, err := w.Finish()
		require.NoError(t, err)
		return data
	}
	tests := []struct {
		name    string
		items   []string
		want    string
		wantErr error
	}{
		{"one item", []string{"a large message\n"}, "a large message\n", nil},
		{"one empty item", []string{""}, "", nil},
		{"no item", nil, "", ErrCorrupt},
		{"two items", []string{"a", "b"}, "", ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := SingleText(payload(t, tt.items...), defaultLimits(t))
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := SingleText([]byte("not gzip"), defaultLimits(t))
	assert.ErrorIs(t, err, ErrCorrupt, "not a payload")
}

// scanErr is Scan's error alone.
func scanErr(data []byte, items int, lim Limits) error {
	_, err := Scan(data, items, lim)
	return err
}
