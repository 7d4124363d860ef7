package azdispatch

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// fuzzBody is a message body of the kinds of fields users decode into.
type fuzzBody struct {
	ID      string            `json:"id"`
	N       int64             `json:"n"`
	Price   float64           `json:"price"`
	OK      bool              `json:"ok"`
	Tags    []string          `json:"tags"`
	Attrs   map[string]int    `json:"attrs"`
	Raw     []byte            `json:"raw"`
	At      time.Time         `json:"at"`
	Next    *fuzzBody         `json:"next"`
	Extra   json.RawMessage   `json:"extra"`
	Headers map[string]string `json:"headers,omitempty"`
}

// FuzzCodecJSON feeds the JSON codec message text, as a listener does with
// whatever it receives. Text that is not JSON is refused; a value it
// decodes encodes to text the queue can carry, which decodes to the same
// value and encodes to the same text again.
func FuzzCodecJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":"o-1","n":3,"price":12.5,"ok":true,"tags":["a"],"attrs":{"x":1},"raw":"AQID","at":"2026-01-02T03:04:05Z","next":{"id":"o-2"},"extra":[1,{}]}`,
		`{"id":"<fragile> & ünïcödé \u2028 \ud834\udd1e"}`,
		`{"id":"\ufffe\uffff\u0000\u001b"}`,
		`{"ID":"case","N":1e2}`,
		`{"n":9223372036854775808}`,
		`{"price":1e400}`,
		`[1,2.5,"x",null,true,{"k":[]}]`,
		`"\xff invalid UTF-8"`,
		`{"id":"a"} {"id":"b"}`,
		`null`,
		``,
	} {
		f.Add(s)
	}
	c := JSON()
	f.Fuzz(func(t *testing.T, text string) {
		t.Parallel()
		var v any
		err := c.Decode(text, &v)
		if !json.Valid([]byte(text)) {
			assert.Error(t, err, "not JSON")
		}
		if err == nil {
			// Every string of v is written anew: whatever the text, the
			// queue can carry them.
			assertJSONRoundTrip[any](t, c, v, true)
		}
		var b fuzzBody
		if err := c.Decode(text, &b); err == nil {
			// Extra keeps its text as it came: only text the queue
			// carried is carried again.
			assertJSONRoundTrip[fuzzBody](t, c, b, xmltext.Check(text) == nil)
		}
	})
}

// assertJSONRoundTrip checks that v, decoded by c, encodes to text that
// decodes back to v and is stable, and that the queue can carry it if
// carried says it should.
func assertJSONRoundTrip[T any](t *testing.T, c Codec, v T, carried bool) {
	t.Helper()
	text, err := c.Encode(v)
	if err != nil {
		// A time decoded with a far offset can fall outside 0000–9999 in
		// UTC; json refuses to write it. Nothing else fails to encode.
		var me *json.MarshalerError
		require.True(t, errors.As(err, &me), "%v", err)
		return
	}
	if carried {
		assert.NoError(t, xmltext.Check(text), "the queue can carry what the codec writes: %q", text)
	}
	var back T
	require.NoError(t, c.Decode(text, &back), "wrote %q", text)
	again, err := c.Encode(back)
	require.NoError(t, err)
	assert.Equal(t, text, again, "written again as itself")
}

// FuzzCodecBase64 feeds the base64 codecs message text, as a listener does
// with whatever it receives. Base64(Raw()) decodes exactly what the standard
// base64 encoding decodes, and Base64(JSON()) what JSON decodes from that;
// their failures say which layer failed. Raw decodes any text as itself.
// What they decode encodes to text the queue can carry and decodes the same.
func FuzzCodecBase64(f *testing.F) {
	for _, s := range []string{
		base64.StdEncoding.EncodeToString([]byte(`{"id":"o-1","n":3}`)),
		base64.StdEncoding.EncodeToString([]byte("\x00\xff binary")),
		"aGVsbG8=\n",
		"aGVsbG8",
		"aGVsbG8=aGVsbG8=",
		"aGVs bG8=",
		"-_-_",
		"e30=",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		t.Parallel()
		want, berr := base64.StdEncoding.DecodeString(text)

		var raw []byte
		err := Base64(Raw()).Decode(text, &raw)
		if berr != nil {
			var ce base64.CorruptInputError
			require.True(t, errors.As(err, &ce), "%v", err)
		} else {
			require.NoError(t, err)
			assert.Equal(t, string(want), string(raw))
			enc, err := Base64(Raw()).Encode(raw)
			require.NoError(t, err)
			assert.NoError(t, xmltext.Check(enc))
			var back []byte
			require.NoError(t, Base64(Raw()).Decode(enc, &back))
			assert.Equal(t, string(raw), string(back))
		}

		var v, direct any
		err = Base64(JSON()).Decode(text, &v)
		switch {
		case berr != nil:
			assert.Error(t, err)
		case JSON().Decode(string(want), &direct) != nil:
			assert.Error(t, err, "what JSON refuses, base64 of it is refused")
		default:
			require.NoError(t, err)
			assert.Equal(t, direct, v)
			assertJSONRoundTrip[any](t, Base64(JSON()), v, true)
		}

		var s string
		require.NoError(t, Raw().Decode(text, &s))
		assert.Equal(t, text, s)
		enc, err := Raw().Encode(s)
		require.NoError(t, err)
		assert.Equal(t, text, enc)
		var n int
		assert.ErrorIs(t, Raw().Decode(text, &n), ErrInvalidConfig)
	})
}

// U+FFFE and U+FFFF are text JSON carries but XML does not: the JSON codec
// writes them escaped, so a body holding them is sent, not refused.
func TestJSONCodecEscapesNoncharacters(t *testing.T) {
	t.Parallel()
	body := "a\uFFFEb\uFFFFc"
	text, err := JSON().Encode(body)
	require.NoError(t, err)
	assert.Equal(t, `"a\ufffeb\uffffc"`, text)
	require.NoError(t, checkText(text, serviceMessageLimit))
	var back string
	require.NoError(t, JSON().Decode(text, &back))
	assert.Equal(t, body, back)
}
