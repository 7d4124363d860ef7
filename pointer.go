package azdispatch

import (
	"encoding/json"
	"fmt"
	"strings"
)

// pointerMagic starts the text of every message whose payload is in a blob.
// A listener recognises it before decoding; no JSON value and no base64 text
// starts with it, and a publisher offloads any body that does, so a message
// of the user's own never passes for one.
const pointerMagic = "azdispatch-payload/1 "

// maxPointerText bounds the text a listener parses as a pointer: a real one
// is about 200 bytes.
const maxPointerText = 512

// Kinds of offloaded payload.
const (
	kindBatch  = "batch"  // many items, one handler call each
	kindSingle = "single" // one message too large for the queue (claim check)
)

// pointer is the message that stands for an offloaded payload. It names the
// blob only by an opaque id: the container is the listener's own, so a
// pointer cannot send a listener to another container, another account, a
// URL or a path.
type pointer struct {
	Kind   string `json:"kind"`
	Blob   string `json:"blob"`   // blobIDLen lowercase hex digits
	Size   int64  `json:"size"`   // bytes of the blob (gzip)
	SHA256 string `json:"sha256"` // of the blob's bytes, lowercase hex
	Items  int    `json:"items"`  // 1 for a single payload
}

const (
	blobIDLen = 32 // 128 random bits as hex
	sha256Len = 64
)

// isPointer reports whether text claims to be a pointer. Whether it is a
// valid one is parsePointer's question.
func isPointer(text string) bool { return strings.HasPrefix(text, pointerMagic) }

// encode returns the pointer as message text.
func (p *pointer) encode() string {
	b, _ := json.Marshal(p) // a struct of strings and numbers always marshals
	return pointerMagic + string(b)
}

// parsePointer reads and checks a pointer against the listener's limits.
// It makes no request: a pointer that fails here is poisoned without any
// blob being touched. Errors match ErrInvalidPointer.
func parsePointer(text string, lim PayloadLimits) (*pointer, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPointer, fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(text, pointerMagic)
	if !ok {
		return nil, bad("no %q prefix", strings.TrimSpace(pointerMagic))
	}
	if len(text) > maxPointerText {
		return nil, bad("%d bytes, more than %d", len(text), maxPointerText)
	}
	var p pointer
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.DisallowUnknownFields() // a "container" or "url" field is refused, not ignored
	if err := dec.Decode(&p); err != nil {
		return nil, bad("%v", err)
	}
	if dec.More() || strings.TrimSpace(rest[dec.InputOffset():]) != "" {
		return nil, bad("trailing data")
	}
	switch {
	case p.Kind != kindBatch && p.Kind != kindSingle:
		return nil, bad("kind %q", p.Kind)
	case !isLowerHex(p.Blob, blobIDLen):
		return nil, bad("blob id %q is not %d lowercase hex digits", truncateUTF8(p.Blob, 80), blobIDLen)
	case !isLowerHex(p.SHA256, sha256Len):
		return nil, bad("sha256 is not %d lowercase hex digits", sha256Len)
	case p.Size < 1 || p.Size > lim.MaxBlobSize:
		return nil, bad("size %d is not between 1 and MaxBlobSize %d", p.Size, lim.MaxBlobSize)
	case p.Kind == kindSingle && p.Items != 1:
		return nil, bad("a single payload has %d items", p.Items)
	case p.Items < 1 || p.Items > lim.MaxItems:
		return nil, bad("%d items, not between 1 and MaxItems %d", p.Items, lim.MaxItems)
	}
	return &p, nil
}

// isLowerHex reports whether s is n lowercase hexadecimal digits.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
