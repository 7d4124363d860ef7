package codec

import (
	"encoding"
	"encoding/json"
	"reflect"
	"time"
	"unsafe"
)

// JSONInPlace is [JSON] whose Decode reads the text where it lies, without
// copying it into a byte slice first: for a listener, that copy was one of
// its allocations and about a seventh of its bytes per message.
//
// It is safe only for a type that [DecodesInPlace] accepts. encoding/json
// itself never writes to its input and keeps no part of it (every string,
// number, map key and raw value it stores is copied out), but an
// UnmarshalJSON or UnmarshalText of another package is given a slice of the
// input and may write to it, which would change a string that must not
// change, or fault on one that lies in read-only memory.
type JSONInPlace struct{ JSON }

// Decode decodes text into v, reading text in place.
func (JSONInPlace) Decode(text string, v any) error {
	return json.Unmarshal(unsafe.Slice(unsafe.StringData(text), len(text)), v)
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

// DecodesInPlace reports whether decoding JSON into a value of type t runs
// no code but encoding/json's and that of [readOnlyUnmarshalers]: whether
// [JSONInPlace] may decode it. A type with any other UnmarshalJSON or
// UnmarshalText within reach, on itself, a field, an element or a map key,
// may not. Interfaces are decoded into as new maps, slices and scalars, so
// they run nothing of the caller's.
func DecodesInPlace(t reflect.Type) bool {
	return !jsonV2 && decodesInPlace(t, map[reflect.Type]bool{})
}

func decodesInPlace(t reflect.Type, seen map[reflect.Type]bool) bool {
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
		return decodesInPlace(t.Elem(), seen)
	case reflect.Map:
		return decodesInPlace(t.Key(), seen) && decodesInPlace(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if !decodesInPlace(t.Field(i).Type, seen) {
				return false
			}
		}
	}
	return true
}
