package wire

import "strings"

// Text is a message's text as it is stored on a queue, in its parts, in
// the order they come: an optional due line, an optional metadata line,
// then either a pointer to a payload blob or the body the codec wrote.
type Text struct {
	// Due says when a message sent to be handled later is due; nil for a
	// message due when sent.
	Due *DueLine
	// Meta is what the publisher carried besides the body; the zero Meta
	// for none.
	Meta Meta
	// Pointer names the blob that holds the body (a claim check) or a
	// batch's items; nil when Body is the message.
	Pointer *Pointer
	// Body is the codec's text when Pointer is nil. After an error of
	// [Parse], it is the text from the part that could not be read on.
	Body string
}

// Parse reads text into its parts, with the pointer's claims checked
// against lim (the zero Limits check its format alone). It makes no request.
//
// On an error, the parts read before the one that failed are set and Body
// holds the rest of text, unread, so that [Text.Render] still gives the
// text back. The error matches the part that failed: [ErrBadDueLine],
// [ErrBadMetadata] or [ErrInvalidPointer]. A body that starts with a prefix
// of this package after the lines is the body: a publisher offloads such a
// body (see [Marked]), so only a text made by hand has one.
func Parse(text string, lim Limits) (Text, error) {
	var t Text
	var err error
	if t.Due, text, err = CutDue(text); err != nil {
		t.Body = text
		return t, err
	}
	if t.Meta, text, err = CutMeta(text); err != nil {
		t.Body = text
		return t, err
	}
	if !strings.HasPrefix(text, PointerMagic) {
		t.Body = text
		return t, nil
	}
	if t.Pointer, err = parsePointer(text, lim); err != nil {
		t.Body = text
		return t, err
	}
	return t, nil
}

// Head is the text's lines before its pointer or body: its due line and its
// metadata line, either of which may be absent.
func (t *Text) Head() string {
	if t.Due == nil {
		return t.Meta.Line()
	}
	return t.Due.Encode() + t.Meta.Line()
}

// Render returns the text as it goes on a queue: its [Text.Head], then its
// pointer or its body.
//
// A text that [Parse] read renders as it was read when it is in the
// canonical form a publisher writes. Otherwise the due line and the
// pointer come back re-encoded (their JSON's fields sorted, spaces and
// duplicate names dropped; a due line keeps the fields this version does
// not know), to the same values; a metadata line and a body always come
// back byte for byte.
func (t *Text) Render() string {
	if t.Pointer != nil {
		return t.Head() + t.Pointer.Encode()
	}
	return t.Head() + t.Body
}

// Marked reports whether text starts with one of the prefixes a listener
// reads as a due line, a metadata line or a pointer. A publisher offloads
// a body that does, so that a listener never mistakes it for one; a text
// that does is one only this package's listeners read.
func Marked(text string) bool {
	for _, magic := range []string{DueMagic, MetaMagic, PointerMagic} {
		if strings.HasPrefix(text, magic) {
			return true
		}
	}
	return false
}
