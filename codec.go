package azdispatch

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
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
// six bytes each.
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
	return string(escapeNoncharacters(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))), nil
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
