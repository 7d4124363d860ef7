package wire

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewMetaRendersSortedUnescaped(t *testing.T) {
	t.Parallel()
	m, err := NewMeta(map[string]string{"b": "<2>", "a": "1"})
	require.NoError(t, err)
	assert.Equal(t, MetaMagic+`{"a":"1","b":"<2>"}`+"\n", m.Line())
	none, err := NewMeta(nil)
	require.NoError(t, err)
	assert.Equal(t, Meta{}, none, "no pairs, no line")
}

func TestNewMetaRefusesWhatAListenerWould(t *testing.T) {
	t.Parallel()
	for name, pairs := range map[string]map[string]string{
		"empty key": {"": "v"},
		"control":   {"k": "\x00"},
		"too long":  {"k": strings.Repeat("v", MaxMetaLine)},
	} {
		_, err := NewMeta(pairs)
		assert.ErrorIs(t, err, ErrBadMetadata, name)
	}
}

// A line read goes back byte for byte, however it was written.
func TestCutMetaKeepsTheLineAsRead(t *testing.T) {
	t.Parallel()
	line := MetaMagic + `{ "b":"\u003c", "a":"1" }` + "\n"
	m, rest, err := CutMeta(line + "body")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "<"}, m.Pairs())
	assert.Equal(t, line, m.Line())
	assert.Equal(t, "body", rest)

	m, rest, err = CutMeta("plain")
	require.NoError(t, err)
	assert.Equal(t, Meta{}, m)
	assert.Equal(t, "plain", rest)

	for _, bad := range []string{MetaMagic + "[1]\n", MetaMagic + `{"a":1}` + "\n", MetaMagic + "{}", MetaMagic + strings.Repeat(" ", MaxMetaLine) + "{}\n"} {
		_, rest, err := CutMeta(bad)
		assert.ErrorIs(t, err, ErrBadMetadata, bad)
		assert.Equal(t, bad, rest)
	}
}
