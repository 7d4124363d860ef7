package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listenerLimits are a listener's default limits.
var listenerLimits = Limits{MaxBlobSize: 64 << 20, MaxExpandedSize: 256 << 20, MaxItems: 1_000_000}

func TestPointerRoundTrips(t *testing.T) {
	t.Parallel()
	p := &Pointer{Kind: KindBatch, Blob: strings.Repeat("0f", 16), Size: 123, SHA256: strings.Repeat("ab", 32), Items: 1000}
	text := p.Encode()
	assert.True(t, strings.HasPrefix(text, PointerMagic))
	assert.Less(t, len(text), MaxPointerText)
	got, err := parsePointer(text, listenerLimits)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

// A pointer names an opaque id in the listener's own container: anything
// that could reach elsewhere fails validation, before any request.
func TestParsePointerRefusesTamperedPointers(t *testing.T) {
	t.Parallel()
	id, sum := strings.Repeat("0f", 16), strings.Repeat("ab", 32)
	valid := `{"kind":"batch","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`
	cases := map[string]string{
		"container path": `{"kind":"batch","container":"../other","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`,
		"container url":  `{"kind":"batch","container":"https://evil.example/c","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`,
		"account":        `{"kind":"batch","account":"other","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`,
		"huge expanded":  strings.Replace(valid, `"items":2`, `"items":2,"expanded_size":99999999999999`, 1),
		"path":           strings.Replace(valid, id, "../"+id[3:], 1),
		"path in id":     strings.Replace(valid, id, id[:16]+"/"+id[17:], 1),
		"url":            strings.Replace(valid, id, "https://evil.example/x", 1),
		"uppercase id":   strings.Replace(valid, id, strings.ToUpper(id), 1),
		"short id":       strings.Replace(valid, id, id[:31], 1),
		"bad hash":       strings.Replace(valid, sum, "zz"+sum[2:], 1),
		"short hash":     strings.Replace(valid, sum, sum[:60], 1),
		"no hash":        strings.Replace(valid, `,"sha256":"`+sum+`"`, "", 1),
		"zero size":      strings.Replace(valid, `"size":10`, `"size":0`, 1),
		"huge size":      strings.Replace(valid, `"size":10`, `"size":99999999999`, 1),
		"no items":       strings.Replace(valid, `"items":2`, `"items":0`, 1),
		"too many items": strings.Replace(valid, `"items":2`, `"items":2000000`, 1),
		"single of two":  strings.Replace(valid, `"batch"`, `"single"`, 1),
		"kind":           strings.Replace(valid, `"batch"`, `"url"`, 1),
		"trailing":       valid + ` {}`,
		"not json":       `blob=` + id,
		"too long":       strings.Replace(valid, `"kind"`, strings.Repeat(" ", 600)+`"kind"`, 1),
	}
	for name, body := range cases {
		_, err := parsePointer(PointerMagic+body, listenerLimits)
		assert.ErrorIs(t, err, ErrInvalidPointer, name)
	}
	_, err := parsePointer(PointerMagic+valid, listenerLimits)
	assert.NoError(t, err, "the untampered pointer is valid")
	// A container and an expanded size are said, for people: the
	// listener checks the container against its own.
	said, err := parsePointer(PointerMagic+strings.Replace(valid, `"items":2`, `"items":2,"container":"other","expanded_size":30`, 1), listenerLimits)
	require.NoError(t, err)
	assert.Equal(t, "other", said.Container)
	assert.EqualValues(t, 30, said.Expanded)
	_, err = parsePointer(valid, listenerLimits)
	assert.ErrorIs(t, err, ErrInvalidPointer, "no magic")
}

func TestNoLimitsParseByFormatAlone(t *testing.T) {
	t.Parallel()
	p := &Pointer{Kind: KindBatch, Blob: strings.Repeat("0f", 16), Size: 99_999_999_999, SHA256: strings.Repeat("ab", 32), Items: 2_000_000}
	_, err := parsePointer(p.Encode(), listenerLimits)
	require.ErrorIs(t, err, ErrInvalidPointer, "beyond the default limits")
	got, err := parsePointer(p.Encode(), Limits{})
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

func TestIsLowerHex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want bool
	}{
		{"0123456789abcdef", 16, true},
		{"", 0, true},
		{"0123456789ABCDEF", 16, false},
		{"0123456789abcdeg", 16, false},
		{"abc", 4, false},
		{"abcd", 3, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsLowerHex(tt.s, tt.n), "%q %d", tt.s, tt.n)
	}
}
