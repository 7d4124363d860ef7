package codec

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownJSON and ownText run code of their own on the bytes they are given.
type ownJSON struct{ S string }

func (o *ownJSON) UnmarshalJSON(b []byte) error { o.S = string(b); return nil }

type ownText string

func (o *ownText) UnmarshalText(b []byte) error { *o = ownText(b); return nil }

// fromJSON has encoding/json/v2's method, known by its name alone.
type fromJSON struct{}

func (*fromJSON) UnmarshalJSONFrom(any) error { return nil }

type valueJSON struct{}

func (valueJSON) UnmarshalJSON([]byte) error { return nil }

// tree refers to itself.
type tree struct {
	Name     string
	Children []*tree
}

func TestDecodesInPlaceOnlyWhereNoOtherCodeSeesTheText(t *testing.T) {
	t.Parallel()
	type plain struct {
		ID    string
		N     int
		Tags  []string
		Attrs map[string]any
		At    time.Time
		Raw   json.RawMessage
		Num   json.Number
		Any   any
		Bytes []byte
	}
	type embeds struct {
		plain
		Extra *[2]map[string][]string
	}
	for _, c := range []struct {
		v    any
		want bool
	}{
		{plain{}, true}, {embeds{}, true}, {tree{}, true}, {"", true}, {map[string]int{}, true}, {(*any)(nil), true},
		{ownJSON{}, false}, {valueJSON{}, false}, {ownText(""), false},
		{struct{ In []ownJSON }{}, false},
		{struct{ In map[ownText]int }{}, false}, // a map key's UnmarshalText
		{struct{ In *struct{ Deep [1]valueJSON } }{}, false},
		{struct{ In json.Unmarshaler }{}, false},
		{fromJSON{}, false}, {struct{ In map[string]fromJSON }{}, false},
	} {
		typ := reflect.TypeOf(c.v)
		assert.Equal(t, c.want && !jsonV2, DecodesInPlace(typ), "%v (none under GOEXPERIMENT=jsonv2)", typ)
	}
}

// TestJSONInPlaceDecodesAsJSONAndKeepsNoPartOfTheText decodes random
// bodies both ways: the values are equal, the text is unchanged, and no
// string decoded in place lies within the text.
func TestJSONInPlaceDecodesAsJSONAndKeepsNoPartOfTheText(t *testing.T) {
	t.Parallel()
	type body struct {
		ID    string
		Tags  []string
		Attrs map[string]any
		Raw   json.RawMessage
		Num   json.Number
		Any   any
		Bytes []byte
	}
	rng := rand.New(rand.NewPCG(7, 11))
	word := func() string {
		letters := []rune("abcé\"\\/\n\u2028<>&")
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteRune(letters[rng.IntN(len(letters))])
		}
		return b.String()
	}
	for range 300 {
		in := body{
			ID: word(), Tags: []string{word(), word()}, Attrs: map[string]any{word(): word(), "n": rng.Float64()},
			Raw: json.RawMessage(`{"k":"` + strings.Repeat("x", rng.IntN(5)) + `"}`), Num: json.Number("12.5"),
			Any: []any{word(), true}, Bytes: []byte(word()),
		}
		text, err := JSON{}.Encode(in)
		require.NoError(t, err)
		before := strings.Clone(text)
		var copied, inPlace body
		require.NoError(t, JSON{}.Decode(text, &copied))
		require.NoError(t, JSONInPlace{}.Decode(text, &inPlace))
		require.Equal(t, copied, inPlace)
		require.Equal(t, before, text, "the text is unchanged")
		start, end := uintptr(unsafe.Pointer(unsafe.StringData(text))), uintptr(len(text))
		for _, s := range append([]string{inPlace.ID, string(inPlace.Num)}, inPlace.Tags...) {
			if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); len(s) > 0 {
				require.False(t, p >= start && p < start+end, "%q lies within the text", s)
			}
		}
		if len(inPlace.Raw) > 0 {
			p := uintptr(unsafe.Pointer(&inPlace.Raw[0]))
			require.False(t, p >= start && p < start+end, "the raw value lies within the text")
		}
	}
	var v body
	assert.Error(t, JSONInPlace{}.Decode("", &v), "no text is an error, as for JSON")
}
