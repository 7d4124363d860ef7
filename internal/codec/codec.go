// Package codec holds the codecs the root package offers: JSON that refuses
// text JSON would change, base64 around another codec, and raw strings and
// bytes; and PooledJSON, the JSON a listener decodes with, keeping its
// decoders, when no code but encoding/json's sees the text. Their errors match xmltext.ErrInvalid for text the service cannot
// carry, and are a *TypeError for a value the raw codec cannot take.
package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Codec turns values into message text and back (the root package's Codec).
type Codec interface {
	Encode(v any) (string, error)
	Decode(text string, v any) error
}

// TypeError is the raw codec's refusal of a value of a type it cannot
// encode or decode into.
type TypeError struct{ Reason string }

func (e *TypeError) Error() string { return e.Reason }

// JSON is the JSON codec; see the root package's JSON for what it does.
type JSON struct{}

func (JSON) Encode(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	// encoding/json writes invalid UTF-8 in a string as the escape
	// \ufffd, without a word: the body would arrive changed. Only a text
	// that holds U+FFFD, escaped or not, can be such a one, so only then
	// is the value looked through.
	if bytes.Contains(b.Bytes(), []byte(`\ufffd`)) || bytes.Contains(b.Bytes(), []byte("\uFFFD")) {
		if path, bad := invalidUTF8(reflect.ValueOf(v), "body", 0); bad {
			return "", fmt.Errorf("%w: %s is not valid UTF-8, which JSON would replace with U+FFFD", xmltext.ErrInvalid, path)
		}
	}
	return string(EscapeNoncharacters(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))), nil
}

// maxUTF8Depth bounds the walk of invalidUTF8: encoding/json refuses
// deeper nesting, and cycles, already.
const maxUTF8Depth = 64

// invalidUTF8 finds a string in v, as encoding/json would write it (struct
// fields, map keys and values, slices, arrays, pointers and interfaces),
// that is not valid UTF-8, and says where it is.
func invalidUTF8(v reflect.Value, path string, depth int) (string, bool) {
	if !v.IsValid() || depth > maxUTF8Depth {
		return "", false
	}
	switch v.Kind() {
	case reflect.String:
		return path, !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return invalidUTF8(v.Elem(), path, depth+1)
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			if p, bad := invalidUTF8(v.Field(i), path+"."+t.Field(i).Name, depth+1); bad {
				return p, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p, bad := invalidUTF8(it.Key(), path+" (a key)", depth+1); bad {
				return p, true
			}
			if p, bad := invalidUTF8(it.Value(), path+"[…]", depth+1); bad {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false // bytes: base64 in JSON
		}
		for i := range v.Len() {
			if p, bad := invalidUTF8(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1); bad {
				return p, true
			}
		}
	}
	return "", false
}

// EscapeNoncharacters writes U+FFFE and U+FFFF, which encoding/json leaves
// as they are but XML cannot carry, as JSON escapes: JSON text holds them
// only inside strings, where an escape means the same, so a string holding
// them is sent rather than refused (see [xmltext.ErrInvalid]).
func EscapeNoncharacters(b []byte) []byte {
	fffe, ffff := []byte("\uFFFE"), []byte("\uFFFF")
	if !bytes.Contains(b, fffe) && !bytes.Contains(b, ffff) {
		return b
	}
	b = bytes.ReplaceAll(b, fffe, []byte(`\ufffe`))
	return bytes.ReplaceAll(b, ffff, []byte(`\uffff`))
}

func (JSON) Decode(text string, v any) error { return json.Unmarshal([]byte(text), v) }

// Base64 is the base64 of Inner's text.
type Base64 struct{ Inner Codec }

func (c Base64) Encode(v any) (string, error) {
	s, err := c.Inner.Encode(v)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func (c Base64) Decode(text string, v any) error {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return fmt.Errorf("base64: %w", err)
	}
	return c.Inner.Decode(string(b), v)
}

// Raw stores string and []byte bodies as they are.
type Raw struct{}

func (Raw) Encode(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case *string:
		return *x, nil
	case *[]byte:
		return string(*x), nil
	}
	return "", &TypeError{Reason: fmt.Sprintf("the raw codec encodes string or []byte, not %T", v)}
}

func (Raw) Decode(text string, v any) error {
	switch x := v.(type) {
	case *string:
		*x = text
		return nil
	case *[]byte:
		*x = []byte(text)
		return nil
	}
	return &TypeError{Reason: fmt.Sprintf("the raw codec decodes into *string or *[]byte, not %T", v)}
}
