package wire

import (
	"errors"
	"fmt"
	"strings"
)

// PoisonMagic starts every poison envelope: the text of a message in a
// poison queue, "azdispatch-poison/1 {header JSON}\n" followed by the
// poisoned message's text. A reader of the poison queue tells an envelope
// from anything else put there by it.
const PoisonMagic = "azdispatch-poison/1 "

// ErrNotEnvelope means a text is not a poison envelope.
var ErrNotEnvelope = errors.New("azdispatch: not a poison envelope")

// RenderEnvelope returns the text of a poison envelope with header (one
// line of JSON, without its end) and body, the poisoned message's text.
func RenderEnvelope(header, body string) string {
	return PoisonMagic + header + "\n" + body
}

// EnvelopeHeadLen is the bytes an envelope's header line takes for a
// header of n bytes: its prefix and its end of line.
func EnvelopeHeadLen(n int) int { return len(PoisonMagic) + n + 1 }

// CutEnvelope splits a poison envelope's text into its header, without its
// prefix and end of line, and its body, byte for byte. Text that is not an
// envelope gives an error matching [ErrNotEnvelope]: the header's JSON is
// its reader's to check.
func CutEnvelope(text string) (header, body string, err error) {
	rest, ok := strings.CutPrefix(text, PoisonMagic)
	if !ok {
		return "", "", ErrNotEnvelope
	}
	header, body, ok = strings.Cut(rest, "\n")
	if !ok {
		return "", "", fmt.Errorf("%w: no header line", ErrNotEnvelope)
	}
	return header, body, nil
}
