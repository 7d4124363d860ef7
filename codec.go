package azdispatch

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"
)

// Codec turns values into message text and back. Listeners decode with
// Decode(text, &body), publishers encode with Encode(body). The codecs of
// this package are stateless and safe for concurrent use.
type Codec interface {
	Encode(v any) (string, error)
	Decode(text string, v any) error
}

// JSON returns the default codec: the value as JSON text. HTML characters
// (<, >, &) are written as they are, not as \u003c escapes, because the
// service counts message size before XML escaping and the escapes would cost
// six bytes each. A string that is not valid UTF-8, which encoding/json
// would silently turn into U+FFFD, is refused with an error matching
// [ErrInvalidText], as every codec of this package refuses it: for bytes,
// use a []byte field (base64 in JSON) or [Raw] with [Base64].
func JSON() Codec { return jsonCodec{} }

// Base64 wraps inner so that the message text is the base64 of inner's text.
// Use Base64([JSON]()) to exchange messages with the Azure Functions and WebJobs
// queue trigger, which expects base64 by default, and Base64([Raw]()) for
// binary []byte payloads. Base64 costs a third more size.
func Base64(inner Codec) Codec { return base64Codec{inner: inner} }

// Raw returns a codec for string and []byte bodies, stored as they are.
// The text must be valid XML character data (see [ErrInvalidText]); sending
// anything else fails before any request is made.
func Raw() Codec { return rawCodec{} }

type jsonCodec struct{}

func (jsonCodec) Encode(v any) (string, error) {
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
			return "", fmt.Errorf("%w: %s is not valid UTF-8, which JSON would replace with U+FFFD", ErrInvalidText, path)
		}
	}
	return string(escapeNoncharacters(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))), nil
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

// escapeNoncharacters writes U+FFFE and U+FFFF, which encoding/json leaves
// as they are but XML cannot carry, as JSON escapes: JSON text holds them
// only inside strings, where an escape means the same, so a string holding
// them is sent rather than refused (see [ErrInvalidText]).
func escapeNoncharacters(b []byte) []byte {
	fffe, ffff := []byte("\uFFFE"), []byte("\uFFFF")
	if !bytes.Contains(b, fffe) && !bytes.Contains(b, ffff) {
		return b
	}
	b = bytes.ReplaceAll(b, fffe, []byte(`\ufffe`))
	return bytes.ReplaceAll(b, ffff, []byte(`\uffff`))
}

func (jsonCodec) Decode(text string, v any) error { return json.Unmarshal([]byte(text), v) }

type base64Codec struct{ inner Codec }

func (c base64Codec) Encode(v any) (string, error) {
	s, err := c.inner.Encode(v)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func (c base64Codec) Decode(text string, v any) error {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return fmt.Errorf("base64: %w", err)
	}
	return c.inner.Decode(string(b), v)
}

type rawCodec struct{}

func (rawCodec) Encode(v any) (string, error) {
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
	return "", &ConfigError{Field: "value", Reason: fmt.Sprintf("the raw codec encodes string or []byte, not %T", v)}
}

func (rawCodec) Decode(text string, v any) error {
	switch x := v.(type) {
	case *string:
		*x = text
		return nil
	case *[]byte:
		*x = []byte(text)
		return nil
	}
	return &ConfigError{Field: "value", Reason: fmt.Sprintf("the raw codec decodes into *string or *[]byte, not %T", v)}
}

// checkCodecType tells, before any message arrives, whether codec can decode
// into *T. Only the raw codec is picky; other codecs report errors per message.
func checkCodecType[T any](codec Codec) error {
	if _, ok := codec.(rawCodec); !ok {
		if b, ok := codec.(base64Codec); ok {
			return checkCodecType[T](b.inner)
		}
		return nil
	}
	var probe T
	return codec.Decode("", &probe)
}
