package azdispatch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func defaultLimits(t testing.TB) PayloadLimits {
	t.Helper()
	lim, err := PayloadLimits{}.withDefaults("test")
	require.NoError(t, err)
	return lim
}

func TestPointerRoundTrips(t *testing.T) {
	t.Parallel()
	p := &pointer{Kind: kindBatch, Blob: strings.Repeat("0f", 16), Size: 123, SHA256: strings.Repeat("ab", 32), Items: 1000}
	text := p.encode()
	assert.True(t, isPointer(text))
	assert.Less(t, len(text), maxPointerText)
	got, err := parsePointer(text, defaultLimits(t))
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
		"other container": `{"kind":"batch","container":"other","blob":"` + id + `","size":10,"sha256":"` + sum + `","items":2}`,
		"path":            strings.Replace(valid, id, "../"+id[3:], 1),
		"path in id":      strings.Replace(valid, id, id[:16]+"/"+id[17:], 1),
		"url":             strings.Replace(valid, id, "https://evil.example/x", 1),
		"uppercase id":    strings.Replace(valid, id, strings.ToUpper(id), 1),
		"short id":        strings.Replace(valid, id, id[:31], 1),
		"bad hash":        strings.Replace(valid, sum, "zz"+sum[2:], 1),
		"short hash":      strings.Replace(valid, sum, sum[:60], 1),
		"no hash":         strings.Replace(valid, `,"sha256":"`+sum+`"`, "", 1),
		"zero size":       strings.Replace(valid, `"size":10`, `"size":0`, 1),
		"huge size":       strings.Replace(valid, `"size":10`, `"size":99999999999`, 1),
		"no items":        strings.Replace(valid, `"items":2`, `"items":0`, 1),
		"too many items":  strings.Replace(valid, `"items":2`, `"items":2000000`, 1),
		"single of two":   strings.Replace(valid, `"batch"`, `"single"`, 1),
		"kind":            strings.Replace(valid, `"batch"`, `"url"`, 1),
		"trailing":        valid + ` {}`,
		"not json":        `blob=` + id,
		"too long":        strings.Replace(valid, `"kind"`, strings.Repeat(" ", 600)+`"kind"`, 1),
	}
	for name, body := range cases {
		_, err := parsePointer(pointerMagic+body, defaultLimits(t))
		assert.ErrorIs(t, err, ErrInvalidPointer, name)
	}
	_, err := parsePointer(pointerMagic+valid, defaultLimits(t))
	assert.NoError(t, err, "the untampered pointer is valid")
}

func TestPayloadLimitsDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	lim := defaultLimits(t)
	assert.Equal(t, PayloadLimits{MaxBlobSize: 64 << 20, MaxExpandedSize: 256 << 20, MaxItemSize: 16 << 20, MaxItems: 1_000_000}, lim)
	_, err := PayloadLimits{MaxItems: -1}.withDefaults("ListenerConfig.PayloadLimits")
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ListenerConfig.PayloadLimits", ce.Field)
}
