package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// MetaMagic starts the metadata line: "azdispatch-meta/1 {JSON object}",
// after the due line, if any, and before the body or pointer.
const MetaMagic = "azdispatch-meta/1 "

// The metadata entries the library itself writes: a message's key, its
// place in its key's order, and, on a message requeued from a poison
// queue, where it came from. The root package names them MetadataKey,
// MetadataOrder and MetadataRequeuedFrom, and says what each holds.
const (
	KeyEntry          = "azdispatch-key"
	OrderEntry        = "azdispatch-order"
	RequeuedFromEntry = "azdispatch-requeued-from"
)

// The metadata entries of groups: a child's reference to its group (see
// internal/group's Ref), and on a group's continuation, the group's
// outcome and the name of the mark that makes its handling once (32
// hexadecimal digits, as a schedule occurrence's).
const (
	GroupEntry     = "azdispatch-group"
	GroupDoneEntry = "azdispatch-group-done"
	OnceEntry      = "azdispatch-once"
)

// TrackEntry holds a tracked message's status token (see internal/track).
const TrackEntry = "azdispatch-track"

// PauseEntry is the queue metadata entry (not a message's) that holds a
// queue's pause (see internal/pause). Metadata names must be identifiers:
// an underscore, not a hyphen.
const PauseEntry = "azdispatch_pause"

// MaxMetaLine bounds the metadata line, newline included, that a publisher
// writes and a listener reads: room for a trace context with a full
// tracestate (512 bytes, W3C) and some more, while a malformed or hostile
// line is refused before it is parsed.
const MaxMetaLine = 4096

// ErrBadMetadata means a metadata line is malformed or too long.
var ErrBadMetadata = errors.New("azdispatch: malformed message metadata")

// Meta is a metadata line: its string pairs, and the line itself, newline
// included, as it was read or as [NewMeta] rendered it. A Meta is not
// changed once made, so that a line read goes back byte for byte; the
// zero Meta is no line.
type Meta struct {
	pairs map[string]string
	line  string
}

// NewMeta checks pairs and renders their line: keys sorted (the same pairs,
// the same bytes), no HTML escaping ("<" in a tracestate would otherwise
// take six bytes of the message). No pairs make the zero Meta: no line at
// all. Errors match [ErrBadMetadata]: an empty key, text XML cannot carry,
// or a line longer than [MaxMetaLine]. A key or value that is not valid
// UTF-8 is written with U+FFFD for its bad bytes, as JSON does, and reads
// back so.
func NewMeta(pairs map[string]string) (Meta, error) {
	if len(pairs) == 0 {
		return Meta{}, nil
	}
	for k, v := range pairs {
		if k == "" {
			return Meta{}, fmt.Errorf("%w: empty key", ErrBadMetadata)
		}
		if err := xmltext.Check(k + v); err != nil {
			return Meta{}, fmt.Errorf("%w: key %q: %w", ErrBadMetadata, k, err)
		}
	}
	var b strings.Builder
	b.WriteString(MetaMagic)
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pairs); err != nil { // ends the line
		return Meta{}, fmt.Errorf("%w: %w", ErrBadMetadata, err)
	}
	line := b.String()
	if len(line) > MaxMetaLine {
		return Meta{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadMetadata, len(line), MaxMetaLine)
	}
	return Meta{pairs: pairs, line: line}, nil
}

// Pairs are the line's pairs: nil for no line (or a line of JSON null). The
// map is the Meta's own: read it, do not change it.
func (m Meta) Pairs() map[string]string { return m.pairs }

// Line is the line, newline included: "" for no line.
func (m Meta) Line() string { return m.line }

// CutMeta splits text, which has no due line (see [CutDue]), into its
// metadata line and the rest, byte for byte: the second step of [Parse].
// Text without the line gives the zero Meta and text unchanged; a line
// longer than [MaxMetaLine] or not a JSON object of strings gives an error
// matching [ErrBadMetadata], and text unchanged.
func CutMeta(text string) (Meta, string, error) {
	if !strings.HasPrefix(text, MetaMagic) {
		return Meta{}, text, nil
	}
	end := strings.IndexByte(text[:min(len(text), MaxMetaLine)], '\n')
	if end < 0 {
		return Meta{}, text, fmt.Errorf("%w: no end of line within %d bytes", ErrBadMetadata, MaxMetaLine)
	}
	var pairs map[string]string
	if err := json.Unmarshal([]byte(text[len(MetaMagic):end]), &pairs); err != nil {
		return Meta{}, text, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	return Meta{pairs: pairs, line: text[:end+1]}, text[end+1:], nil
}
