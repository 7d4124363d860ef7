package codec

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

func TestJSONRefusesTextItWouldChange(t *testing.T) {
	t.Parallel()
	_, err := JSON{}.Encode(map[string]string{"k": "a\xffb"})
	assert.ErrorIs(t, err, xmltext.ErrInvalid, "invalid UTF-8 would arrive as U+FFFD")

	text, err := JSON{}.Encode("<&>\uFFFE")
	require.NoError(t, err)
	assert.Equal(t, `"<&>\ufffe"`, text, "HTML as it is; a noncharacter as an escape XML can carry")
	var back string
	require.NoError(t, JSON{}.Decode(text, &back))
	assert.Equal(t, "<&>\uFFFE", back)
}

func TestBase64WrapsItsInner(t *testing.T) {
	t.Parallel()
	c := Base64{Inner: JSON{}}
	text, err := c.Encode([]int{1, 2})
	require.NoError(t, err)
	assert.Equal(t, "WzEsMl0=", text)
	var back []int
	require.NoError(t, c.Decode(text, &back))
	assert.Equal(t, []int{1, 2}, back)
	assert.Error(t, c.Decode("not base64!", &back))
}

func TestRawTakesStringsAndBytesOnly(t *testing.T) {
	t.Parallel()
	text, err := Raw{}.Encode([]byte("x"))
	require.NoError(t, err)
	assert.Equal(t, "x", text)
	var te *TypeError
	_, err = Raw{}.Encode(5)
	assert.True(t, errors.As(err, &te))
	var n int
	assert.True(t, errors.As(Raw{}.Decode("5", &n), &te))
}
