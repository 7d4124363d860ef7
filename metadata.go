package azdispatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// Metadata is what a publisher carries with a message besides its body:
// string keys and values, such as the W3C trace context ("traceparent",
// "tracestate") that the otelazdispatch package propagates. A Storage queue
// message has no headers, so metadata travels in the message text, as a
// first line "azdispatch-meta/1 {JSON object}" before the text the codec
// made. Only messages sent with metadata have the line: a message without
// any is byte for byte what the codec wrote, so that a queue shared with
// the Azure Functions queue trigger (which would not understand the line)
// stays readable by it. The line counts against MaxMessageSize. Listeners
// of this package accept messages with and without it, and give the
// handler the body alone.
//
// Metadata survives every path a message takes: a claim-checked message or
// a batch carries it on its pointer message (a batch's metadata is its
// items'), a poisoned message keeps it in its envelope's body (a batch item
// poisoned alone gets its batch's), and Requeue puts it back.
type Metadata map[string]string

// metadataMagic starts the metadata line of a message text.
const metadataMagic = "azdispatch-meta/1 "

// maxMetadataLine bounds the metadata line, newline included, that a
// publisher writes and a listener reads: room for a trace context with a
// full tracestate (512 bytes, W3C) and some more, while a malformed or
// hostile line is refused before it is parsed.
const maxMetadataLine = 4096

// ErrBadMetadata means a message's metadata line (see Metadata) is
// malformed or too long. A listener poisons such a message with it as the
// reason; a publisher refuses to send metadata that would make one.
var ErrBadMetadata = errors.New("azdispatch: malformed message metadata")

// ParseMetadata splits a message text into its metadata and the text the
// codec wrote (or the pointer to it). A text without a metadata line gives
// nil metadata and the text unchanged; a malformed line an error matching
// ErrBadMetadata.
func ParseMetadata(text string) (Metadata, string, error) {
	if !strings.HasPrefix(text, metadataMagic) {
		return nil, text, nil
	}
	end := strings.IndexByte(text[:min(len(text), maxMetadataLine)], '\n')
	if end < 0 {
		return nil, text, fmt.Errorf("%w: no end of line within %d bytes", ErrBadMetadata, maxMetadataLine)
	}
	var m Metadata
	if err := json.Unmarshal([]byte(text[len(metadataMagic):end]), &m); err != nil {
		return nil, text, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	return m, text[end+1:], nil
}

// hasMetadata reports whether text starts as a metadata line would: such a
// text is offloaded when sent, so that a listener never mistakes the body
// for metadata.
func hasMetadata(text string) bool { return strings.HasPrefix(text, metadataMagic) }

// line returns the metadata line to put before a message's text: "" when
// there is no metadata.
func (m Metadata) line() (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	for k, v := range m {
		if k == "" {
			return "", fmt.Errorf("%w: empty key", ErrBadMetadata)
		}
		if err := xmltext.Check(k + v); err != nil {
			return "", fmt.Errorf("%w: key %q: %w", ErrBadMetadata, k, err)
		}
	}
	// Keys sorted: the same metadata, the same bytes. No HTML escaping:
	// "<" in a tracestate would otherwise take six bytes of the message.
	var b strings.Builder
	b.WriteString(metadataMagic)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string(m)); err != nil { // ends the line
		return "", fmt.Errorf("%w: %w", ErrBadMetadata, err)
	}
	line := b.String()
	if len(line) > maxMetadataLine {
		return "", fmt.Errorf("%w: %d bytes, more than %d", ErrBadMetadata, len(line), maxMetadataLine)
	}
	return line, nil
}
