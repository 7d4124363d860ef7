package azdispatch

import (
	"strings"
	"testing"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// FuzzParseMetadata reads message texts as a listener does: whatever the
// text, ParseMetadata returns in bounded work, and the text after a line it
// accepts is the rest of the original text. Metadata it accepts encodes
// again to a line that parses to the same metadata (a poisoned batch item
// carries its batch's that way).
func FuzzParseMetadata(f *testing.F) {
	f.Add("plain text")
	f.Add(wire.MetaMagic + "{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}\n{\"n\":1}")
	f.Add(wire.MetaMagic + "{}\n" + wire.PointerMagic + "{}")
	f.Add(wire.MetaMagic + "{\"a\":1}\n")
	f.Add(wire.MetaMagic + "null\n")
	f.Add(wire.MetaMagic + "{\"\":\"\"}\n")
	f.Fuzz(func(t *testing.T, text string) {
		meta, rest, err := ParseMetadata(text)
		if err != nil {
			if rest != text {
				t.Fatalf("a failed parse changed the text")
			}
			return
		}
		if !strings.HasSuffix(text, rest) {
			t.Fatalf("rest %q is not the end of %q", rest, text)
		}
		if meta == nil {
			return
		}
		line, err := meta.line()
		if err != nil {
			return // read, but not writable: an empty key, text XML cannot carry
		}
		again, tail, err := ParseMetadata(line + "x")
		if err != nil || tail != "x" || len(again) != len(meta) {
			t.Fatalf("metadata %q did not survive encoding: %v %q %q", meta, err, again, tail)
		}
		for k, v := range meta {
			if again[k] != v {
				t.Fatalf("key %q: %q became %q", k, v, again[k])
			}
		}
	})
}
