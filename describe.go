package azdispatch

import (
	"errors"
	"time"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// TextKind says what a message text is, as [DescribeText] reads it.
type TextKind string

// Kinds of message text.
const (
	// TextPlain is the text a codec wrote, perhaps after a due line and a
	// metadata line.
	TextPlain TextKind = "plain"
	// TextPointer stands for a payload in a blob: a claim-checked message
	// or a batch (see [TextInfo.Pointer]).
	TextPointer TextKind = "pointer"
	// TextInvalidPointer claims to be a pointer but is not a valid one: a
	// listener poisons it.
	TextInvalidPointer TextKind = "invalid-pointer"
	// TextBadMetadata starts with a metadata line that a listener refuses
	// (see [ErrBadMetadata]).
	TextBadMetadata TextKind = "bad-metadata"
	// TextBadDueLine starts with a due line that a listener refuses.
	TextBadDueLine TextKind = "bad-due-line"
	// TextPoison is a poison envelope (see [TextInfo.Poison]).
	TextPoison TextKind = "poison"
)

// TextInfo is what [DescribeText] tells of a message text.
type TextInfo struct {
	Kind TextKind
	// Due says when a message sent to be handled later is due; nil for
	// one due when sent.
	Due *DueInfo
	// Metadata is what the text carries besides the message (a trace
	// context, say); nil for none.
	Metadata Metadata
	// Pointer names the payload blob of a TextPointer.
	Pointer *PayloadPointer
	// Poison is the envelope of a TextPoison, its body included.
	Poison *PoisonEnvelope
	// Body is the text after its due and metadata lines: the codec's text
	// (or a poison envelope's whole text). For a malformed text, it is the
	// text from the part that is malformed on; "" for a TextPointer.
	Body string
	// Problem says why a text of a malformed kind is refused; "" otherwise.
	Problem string
	// Reserved reports whether the text starts as a due line, a metadata
	// line or a pointer does. A [Publisher] offloads a body that does (it
	// needs a payload store for it), so that no listener mistakes it for one.
	Reserved bool
}

// DueInfo is the due line of a message sent to be handled later: when it
// is due, and how often a listener received it early and hid it again.
type DueInfo struct {
	// At is the due time the sender named; zero if After says it instead.
	At time.Time
	// After is the due time as a delay from the message's insertion,
	// counted on the service's clock.
	After time.Duration
	// Hops counts the times a listener hid the message again because it
	// was not due yet.
	Hops int64
	// Occurrence is the occurrence of a schedule a [Scheduler] sent the
	// message for; nil if none did.
	Occurrence *Occurrence
}

// DueAt is when the message is due, for one the service inserted at
// inserted (see [Delivery.InsertedAt]).
func (d *DueInfo) DueAt(inserted time.Time) time.Time {
	if !d.At.IsZero() {
		return d.At
	}
	return inserted.Add(d.After)
}

// PayloadPointer is the text of a message whose payload is in a blob of a
// [PayloadStore]: a claim-checked message or a batch. Its JSON is the
// pointer's own.
type PayloadPointer struct {
	Kind   string `json:"kind"`   // "single" (a claim check) or "batch"
	Blob   string `json:"blob"`   // the blob's name in the payload container
	Size   int64  `json:"size"`   // bytes of the blob as stored (gzip)
	SHA256 string `json:"sha256"` // of the blob's bytes, lowercase hex
	Items  int    `json:"items"`  // 1 for a single payload
	// Container is the container the blob was written to, if the pointer
	// says; Expanded is the payload's size once decompressed, if it says.
	Container string `json:"container,omitempty"`
	Expanded  int64  `json:"expanded_size,omitempty"`
}

// DescribeText tells what a message text is, for a person or a tool that
// shows it (a peek, a poison queue's view): its kind, its due line, its
// metadata, the payload blob a pointer names, or the envelope of a poison
// queue's message. It makes no request, and reads a pointer by its format
// alone: one beyond a listener's [PayloadLimits] is still a pointer.
func DescribeText(text string) TextInfo {
	msg, err := wire.Parse(text, wire.Limits{})
	info := TextInfo{Kind: TextPlain, Metadata: msg.Meta.Pairs(), Body: msg.Body, Reserved: wire.Marked(text)}
	if d := msg.Due; d != nil {
		info.Due = &DueInfo{At: d.At, After: time.Duration(d.After) * time.Second, Hops: d.Hops}
		if d.Occ != nil {
			info.Due.Occurrence = occurrenceOf(d.Occ)
		}
	}
	if err != nil {
		info.Problem = err.Error()
	}
	switch {
	case errors.Is(err, wire.ErrBadDueLine):
		info.Kind = TextBadDueLine
	case errors.Is(err, wire.ErrBadMetadata):
		info.Kind = TextBadMetadata
	case err != nil:
		info.Kind = TextInvalidPointer
	case msg.Pointer != nil:
		p := msg.Pointer
		info.Kind, info.Pointer = TextPointer, &PayloadPointer{Kind: p.Kind, Blob: p.Blob, Size: p.Size, SHA256: p.SHA256,
			Items: p.Items, Container: p.Container, Expanded: p.Expanded}
	case msg.Meta.Line() == "":
		if env, err := ParsePoison(msg.Body); err == nil {
			info.Kind, info.Poison = TextPoison, env
		}
	}
	return info
}
