package dashboard

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/azdispatch/azdispatch"
)

// bodyViews are the ways a body can be shown: decoded through the codec
// (as indented JSON), the text as stored, or that text in base64 (for
// bytes a page cannot show).
var bodyViews = []string{"decoded", "raw", "base64"}

func bodyViewName(s string) string {
	for _, v := range bodyViews {
		if v == s {
			return v
		}
	}
	return "decoded"
}

// maxShownBody bounds a body shown on a page.
const maxShownBody = 16 << 10

// bodyView is a message body as a page shows it.
type bodyView struct {
	Text string
	Note string // what it is, or why it is not shown as asked
}

// decodeBody renders a poison envelope's body in view: a claim-checked
// body is a pointer to a blob, named by its size (never its URL); a body
// that carries metadata (a trace context) has it split off first.
func decodeBody(text, view string, codec azdispatch.Codec) bodyView {
	info := azdispatch.DescribeText(text)
	rest := info.Body
	var note string
	switch {
	case info.Kind == azdispatch.TextBadMetadata:
		note = "its metadata line is malformed"
	case info.Kind == azdispatch.TextPointer:
		p := info.Pointer
		return bodyView{Note: fmt.Sprintf("offloaded: a %s payload of %s (%d items) in the payload store; not fetched", p.Kind, fmtBytes(p.Size), p.Items)}
	case info.Kind == azdispatch.TextInvalidPointer:
		return bodyView{Note: "an invalid payload pointer"}
	case len(info.Metadata) > 0:
		note = fmt.Sprintf("carries %d metadata entries", len(info.Metadata))
	}
	cut := func(s string) string {
		if len(s) <= maxShownBody {
			return s
		}
		s = s[:maxShownBody]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1] // not inside a character
		}
		return s + "…"
	}
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		if b == "" {
			return a
		}
		return a + "; " + b
	}
	switch view {
	case "raw":
		return bodyView{Text: cut(rest), Note: note}
	case "base64":
		return bodyView{Text: cut(base64.StdEncoding.EncodeToString([]byte(rest))), Note: note}
	}
	// Decoded into JSON text as it is, where the codec allows (JSON, and
	// Base64 of JSON): indented, every number exactly as written. A value
	// decoded into any would pass its numbers through float64, and show
	// 12345678901234567891 as 12345678901234567000.
	var raw json.RawMessage
	if err := codec.Decode(rest, &raw); err == nil && json.Valid(raw) {
		var out bytes.Buffer
		if err := json.Indent(&out, raw, "", "  "); err == nil {
			return bodyView{Text: cut(out.String()), Note: note}
		}
	}
	var v any
	if err := codec.Decode(rest, &v); err != nil {
		return bodyView{Text: cut(rest), Note: join(note, "the codec cannot decode it ("+cleanError(err)+"); shown raw")}
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return bodyView{Text: cut(fmt.Sprint(v)), Note: note}
	}
	return bodyView{Text: cut(string(out)), Note: note}
}
