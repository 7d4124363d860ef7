// Package wire is a message's text as it is stored on a queue, and owns
// every prefix and line format of it:
//
//	azdispatch-due/1 {"after":864000}        optional due line (DueLine)
//	azdispatch-meta/1 {"traceparent":"…"}    optional metadata line (Meta)
//	azdispatch-payload/1 {"kind":"single",…} a pointer to a payload blob (Pointer),
//	or the body the codec wrote
//
// [Parse] reads a text into a [Text] and [Text.Render] writes one; [CutDue]
// and [CutMeta] are Parse's first two steps, for a reader that keeps the
// rest of a text byte for byte. A poison queue's messages are envelopes
// around such a text (see [CutEnvelope]). A payload blob starts with
// [ItemsMagic]; the framing after it is package payload's, not a queue
// text's.
//
// The package makes no request and keeps no state: what a due time means,
// which blob container a pointer may name and what metadata keys say are
// its callers' business.
package wire
