package codec

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

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

func TestPoolableOnlyWhereNoOtherCodeSeesTheBuffer(t *testing.T) {
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
		assert.Equal(t, c.want && !jsonV2, Poolable(typ), "%v (none under GOEXPERIMENT=jsonv2)", typ)
	}
}

// pooledBody reaches every kind of value encoding/json stores.
type pooledBody struct {
	ID    string
	Tags  []string
	Attrs map[string]any
	Raw   json.RawMessage
	Num   json.Number
	Any   any
	Bytes []byte
	N     int
	Deep  *pooledBody
}

// randomBody is a pooledBody with random strings that need escaping.
func randomBody(rng *rand.Rand) pooledBody {
	word := func() string {
		letters := []rune("abcé\"\\/\n\u2028<>&")
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteRune(letters[rng.IntN(len(letters))])
		}
		return b.String()
	}
	return pooledBody{
		ID: word(), Tags: []string{word(), word()}, Attrs: map[string]any{word(): word(), "n": rng.Float64()},
		Raw: json.RawMessage(`{"k":"` + strings.Repeat("x", rng.IntN(5)) + `"}`), Num: json.Number("12.5"),
		Any: []any{word(), true}, Bytes: []byte(word()), N: rng.IntN(1000),
		Deep: &pooledBody{ID: strings.Repeat(word(), rng.IntN(400))}, // some past pooledMax
	}
}

// TestPooledJSONDecodesAsUnmarshalAndKeepsNothingOfItsBuffer decodes
// random bodies both ways through one PooledJSON, whose decoders are
// reused: the values are equal, and what an earlier decode stored is
// unchanged by the later ones.
func TestPooledJSONDecodesAsUnmarshalAndKeepsNothingOfItsBuffer(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	c := NewPooledJSON()
	var decoded, copies []pooledBody
	for range 300 {
		text, err := JSON{}.Encode(randomBody(rng))
		require.NoError(t, err)
		var want, got pooledBody
		require.NoError(t, json.Unmarshal([]byte(text), &want))
		require.NoError(t, c.Decode(text, &got))
		require.Equal(t, want, got)
		decoded, copies = append(decoded, got), append(copies, want)
	}
	assert.Equal(t, copies, decoded, "no decode changed what an earlier one stored")
}

// TestPooledJSONAcceptsAndRefusesAsUnmarshal gives one PooledJSON texts
// json.Unmarshal refuses or barely accepts, each between two good ones:
// the same error, or the same value, and a decoder left fit for the next.
func TestPooledJSONAcceptsAndRefusesAsUnmarshal(t *testing.T) {
	t.Parallel()
	c := NewPooledJSON()
	texts := []string{
		``, ` `, "\t\r\n", `{`, `{"ID":`, `{"ID":"a"`, `{"ID":"a"}x`, `{"ID":"a"}}`, `{"ID":"a"}]`,
		`{"ID":"a"} {"ID":"b"}`, `{"ID":"a"} ,`, `{"ID":"a"}  `, "\n{\"ID\":\"a\"}\n", `{"N":"x"}`,
		`{"N":1.5}`, `{"Tags":{}}`, `[]`, `null`, `12`, `12 `, `"s"`, `{"ID":"\ud800"}`, "{\"ID\":\"\xff\"}",
		`{"Bytes":"!!"}`, `{"Num":"x"}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"Deep":{"Deep":{"ID":"d"}}}`, `{"id":"case"}`, `{"Unknown":1}`, "\x00", `{"ID":"a"}` + "\x00",
		`{"ID":"` + strings.Repeat("y", pooledMax) + `"}x`,
	}
	for _, text := range texts {
		for _, each := range []string{`{"ID":"before"}`, text, `{"ID":"after"}`} {
			var want, got pooledBody
			wantErr := json.Unmarshal([]byte(each), &want)
			err := c.Decode(each, &got)
			if wantErr != nil {
				require.EqualError(t, err, wantErr.Error(), "%q", each)
				require.IsType(t, wantErr, err, "%q", each)
				continue
			}
			require.NoError(t, err, "%q", each)
			require.Equal(t, want, got, "%q", each)
		}
		var anyWant, anyGot any
		wantErr, err := json.Unmarshal([]byte(text), &anyWant), c.Decode(text, &anyGot)
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error(), "%q into any", text)
			continue
		}
		require.NoError(t, err, "%q into any", text)
		require.Equal(t, anyWant, anyGot, "%q into any", text)
	}
}

func TestPooledJSONDecodesSideBySide(t *testing.T) {
	t.Parallel()
	c := NewPooledJSON()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 200 {
				in := randomBody(rng)
				text, err := JSON{}.Encode(in)
				if !assert.NoError(t, err) {
					return
				}
				var want, got pooledBody
				_ = json.Unmarshal([]byte(text), &want)
				if !assert.NoError(t, c.Decode(text, &got)) || !assert.Equal(t, want, got) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzPooledJSON decodes each input with one PooledJSON kept across
// inputs, so that a decoder reaches it in whatever state the inputs before
// left it, and with json.Unmarshal: the same error, or the same value.
func FuzzPooledJSON(f *testing.F) {
	for _, seed := range []string{``, `{}`, `{"ID":"a","Tags":["b"]} `, `{"ID":"a"}}`, `[1,2]x`, `{"N":"1"}`, `"\u00e9"`} {
		f.Add(seed)
	}
	c := NewPooledJSON()
	f.Fuzz(func(t *testing.T, text string) {
		var want, got pooledBody
		wantErr, err := json.Unmarshal([]byte(text), &want), c.Decode(text, &got)
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error())
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}
