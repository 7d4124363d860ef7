package azdispatch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/codec"
)

func TestCodecsRoundTrip(t *testing.T) {
	t.Parallel()
	type order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
		Note  string  `json:"note"`
	}
	in := order{ID: "o-1", Total: 12.5, Note: "<fragile> & ünïcödé"}
	for name, c := range map[string]Codec{"json": JSON(), "base64 json": Base64(JSON())} {
		text, err := c.Encode(in)
		require.NoError(t, err, name)
		var out order
		require.NoError(t, c.Decode(text, &out), name)
		assert.Equal(t, in, out, name)
	}

	text, err := JSON().Encode(in)
	require.NoError(t, err)
	assert.Contains(t, text, "<fragile> &", "HTML characters are not escaped: they would cost 6 bytes each")
	assert.False(t, strings.HasSuffix(text, "\n"))

	for _, v := range []any{"raw text", []byte("raw bytes")} {
		text, err := Raw().Encode(v)
		require.NoError(t, err)
		assert.Equal(t, "raw ", text[:4])
	}
	var s string
	require.NoError(t, Raw().Decode("x", &s))
	assert.Equal(t, "x", s)
	var b []byte
	require.NoError(t, Base64(Raw()).Decode(base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff}), &b))
	assert.Equal(t, []byte{0, 1, 0xff}, b, "binary through base64")

	_, err = Raw().Encode(42)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	assert.ErrorIs(t, Raw().Decode("x", new(int)), ErrInvalidConfig)
	assert.Error(t, Base64(JSON()).Decode("not base64!", &s))
}

func TestBase64JSONMatchesTheFunctionsTriggerFormat(t *testing.T) {
	t.Parallel()
	// The Functions queue trigger reads base64 of UTF-8 JSON by default.
	text, err := Base64(JSON()).Encode(map[string]int{"n": 1})
	require.NoError(t, err)
	raw, err := base64.StdEncoding.DecodeString(text)
	require.NoError(t, err)
	var v map[string]int
	require.NoError(t, json.Unmarshal(raw, &v))
	assert.Equal(t, 1, v["n"])
}

func TestListenerAndPublisherAgreeOnEachCodec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name  string
		codec Codec
	}{{"json", JSON()}, {"base64", Base64(JSON())}, {"raw", Raw()}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := testQueue(t)
			p, err := NewPublisher[string](q, &PublisherOptions{Codec: tt.codec})
			require.NoError(t, err)
			want := `say "hi" <b> & 𝄞`
			_, err = p.Send(ctx, want)
			require.NoError(t, err)

			got := make(chan string, 1)
			cfg := quick()
			cfg.Codec = tt.codec
			l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
				got <- m.Body
				return nil
			}, cfg)
			require.NoError(t, err)
			stop := started(t, l)
			assert.Equal(t, want, <-got)
			require.NoError(t, stop())
		})
	}
}

func TestCodecTypeIsCheckedAtConstruction(t *testing.T) {
	t.Parallel()
	q := testQueue(t)
	_, err := NewPublisher[struct{ A int }](q, &PublisherOptions{Codec: Raw()})
	assert.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewPublisher[[]byte](q, &PublisherOptions{Codec: Base64(Raw())})
	assert.NoError(t, err)
	_, err = NewPublisher[struct{ A int }](q, &PublisherOptions{Codec: Base64(Raw())})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

// Text that is not valid UTF-8 is refused by every codec, not sent changed:
// encoding/json writes it as U+FFFD without a word, and the default JSON
// codec used to send a Publisher[string]'s body so. A real U+FFFD is sent.
func TestEveryCodecRefusesTextThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	bad := "caf\xe9"
	type order struct {
		Name  string
		Lines []map[string]string
		Raw   []byte
	}
	for name, v := range map[string]any{
		"a string":            bad,
		"a struct's field":    order{Name: bad},
		"a map's value":       order{Lines: []map[string]string{{"sku": bad}}},
		"a map's key":         map[string]int{bad: 1},
		"behind an interface": []any{1, &order{Name: bad}},
	} {
		_, err := JSON().Encode(v)
		require.ErrorIs(t, err, ErrInvalidText, name)
	}
	for name, v := range map[string]any{
		"a real U+FFFD":       "replacement \uFFFD character",
		"bytes, as base64":    order{Raw: []byte(bad)},
		"a struct, all valid": order{Name: "café", Lines: []map[string]string{{"sku": "x"}}},
	} {
		_, err := JSON().Encode(v)
		require.NoError(t, err, name)
	}
	// Raw leaves the text as it is; the check before the send refuses it.
	text, err := Raw().Encode(bad)
	require.NoError(t, err)
	assert.ErrorIs(t, checkText(text, serviceMessageLimit), ErrInvalidText)
}

// keeper's UnmarshalJSON keeps the bytes it is given, which the
// json.Unmarshaler contract forbids but nothing prevents: a decoder that
// reused its buffer would change what it kept.
type keeper struct {
	Kept []byte
	Seen string
}

func (k *keeper) UnmarshalJSON(b []byte) error {
	k.Kept, k.Seen = b, string(b)
	return nil
}

func TestAListenerKeepsDecodersOnlyWhereNoUnmarshalerSeesTheirBuffer(t *testing.T) {
	t.Parallel()
	type plain struct {
		ID string
		At time.Time
	}
	assert.IsType(t, &codec.PooledJSON{}, bodyDecoder[plain](JSON()), "encoding/json alone reads the buffer")
	assert.Equal(t, JSON(), bodyDecoder[keeper](JSON()))
	assert.Equal(t, JSON(), bodyDecoder[struct{ In []*keeper }](JSON()))
	assert.Equal(t, Base64(JSON()), bodyDecoder[plain](Base64(JSON())), "another codec is left as it is")

	// Every keeper still holds its own message's text once all are handled.
	q := testQueue(t)
	const n = 20
	sendTexts(t, q, n, func(i int) string { return fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", i)) })
	var mu sync.Mutex
	var got []keeper
	l, err := NewListener(q, func(_ context.Context, m *Message[keeper]) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.Body)
		return nil
	}, quick())
	require.NoError(t, err)
	stop := started(t, l)
	require.Eventually(t, func() bool { return l.State().Succeeded == n }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, stop())
	require.Len(t, got, n)
	for _, k := range got {
		assert.Equal(t, k.Seen, string(k.Kept), "what an unmarshaler kept is its own")
	}
}
