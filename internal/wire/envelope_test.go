package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnEnvelopeSplitsAsRendered(t *testing.T) {
	t.Parallel()
	text := RenderEnvelope(`{"queue":"q"}`, "line 1\nline 2")
	assert.Equal(t, EnvelopeHeadLen(len(`{"queue":"q"}`)), len(text)-len("line 1\nline 2"))
	header, body, err := CutEnvelope(text)
	require.NoError(t, err)
	assert.Equal(t, `{"queue":"q"}`, header)
	assert.Equal(t, "line 1\nline 2", body)

	_, _, err = CutEnvelope(`{"queue":"q"}`)
	assert.ErrorIs(t, err, ErrNotEnvelope)
	_, _, err = CutEnvelope(PoisonMagic + "{} without an end")
	assert.ErrorIs(t, err, ErrNotEnvelope)
}
