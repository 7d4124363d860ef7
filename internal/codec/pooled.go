package codec

import (
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"
)

// PooledJSON is [JSON] whose Decode keeps its decoders for the next text
// rather than making one per call, as encoding/json's Unmarshal does. For
// a listener, the decoder's state, its scanner's stack and the error
// context of its struct fields were four allocations and about 220 bytes
// per message: a third of its allocations, and garbage the collector
// then had to find. Use [NewPooledJSON]; it is safe for concurrent use.
//
// A decoder copies the text into a buffer of its own, which the next text
// overwrites. That is safe only for a type that [Poolable] accepts:
// encoding/json keeps no part of its buffer (every string, number, map key
// and raw value it stores is copied out), but an UnmarshalJSON or
// UnmarshalText of another package is given a slice of it, and one that
// kept the slice would see it change.
//
// What it accepts and refuses, and the values it decodes, are
// json.Unmarshal's: a text that is not one JSON value alone, or that does
// not fit the type, is decoded again by json.Unmarshal for its error. On
// an error, v may hold part of what the text says, which json.Unmarshal
// leaves out for a text that is not JSON: a listener, the one user, sets
// no value it failed to decode.
type PooledJSON struct {
	JSON
	decoders sync.Pool // of *pooledDecoder
}

// NewPooledJSON returns a PooledJSON with no decoder yet.
func NewPooledJSON() *PooledJSON { return &PooledJSON{} }

// pooledMax is the longest text a kept decoder reads. A decoder's buffer
// grows to about twice the longest text it read and is kept with it, so a
// longer one is decoded by json.Unmarshal: a few large messages then leave
// no large buffers behind, one per decoder in the pool.
const pooledMax = 4 << 10

// pooledDecoder is a decoder with the reader it reads from.
type pooledDecoder struct {
	r strings.Reader
	d *json.Decoder
}

// Decode decodes text into v as json.Unmarshal does.
func (c *PooledJSON) Decode(text string, v any) error {
	if len(text) > pooledMax {
		return c.JSON.Decode(text, v)
	}
	pd, _ := c.decoders.Get().(*pooledDecoder)
	if pd == nil {
		pd = &pooledDecoder{}
		pd.d = json.NewDecoder(&pd.r)
	}
	pd.r.Reset(text)
	if err := pd.d.Decode(v); err != nil || !pd.atEnd() {
		// Not one value of the type: json.Unmarshal says why, in its
		// words. A decoder that failed keeps its error, and one that
		// stopped short of the end holds the rest: neither is kept.
		return c.JSON.Decode(text, v)
	}
	c.decoders.Put(pd)
	return nil
}

// atEnd reports whether nothing but JSON whitespace follows the value the
// decoder read. Token skips it and finds the end of the text, or the start
// of something else.
func (pd *pooledDecoder) atEnd() bool {
	_, err := pd.d.Token()
	return err == io.EOF
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// readOnlyUnmarshalers are the unmarshalers reachable from common bodies
// that are known to read their input without writing to it or keeping it.
var readOnlyUnmarshalers = map[reflect.Type]bool{
	reflect.TypeFor[time.Time]():       true, // parses
	reflect.TypeFor[json.RawMessage](): true, // appends a copy
}

// Poolable reports whether decoding JSON into a value of type t runs no
// code but encoding/json's and that of [readOnlyUnmarshalers]: whether a
// [PooledJSON] may decode it. A type with any other UnmarshalJSON or
// UnmarshalText within reach, on itself, a field, an element or a map key,
// may not. Interfaces are decoded into as new maps, slices and scalars, so
// they run nothing of the caller's.
func Poolable(t reflect.Type) bool {
	return !jsonV2 && poolable(t, map[reflect.Type]bool{})
}

func poolable(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true // already being judged: a cycle adds nothing
	}
	seen[t] = true
	if readOnlyUnmarshalers[t] {
		return true
	}
	for _, u := range []reflect.Type{jsonUnmarshaler, textUnmarshaler} {
		if t.Implements(u) || reflect.PointerTo(t).Implements(u) {
			return false
		}
	}
	// encoding/json/v2's own method, which encoding/json calls too when
	// built with GOEXPERIMENT=jsonv2: its decoder hands out slices of the
	// input. Known by its name, since its package exists only then.
	if _, ok := reflect.PointerTo(t).MethodByName("UnmarshalJSONFrom"); ok {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return poolable(t.Elem(), seen)
	case reflect.Map:
		return poolable(t.Key(), seen) && poolable(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if !poolable(t.Field(i).Type, seen) {
				return false
			}
		}
	}
	return true
}
