package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/azdispatch/azdispatch/internal/xmltext"
)

// PointerMagic starts the text of every message whose payload is in a
// blob (after its due and metadata lines, if any). A listener recognises
// it before decoding; no JSON value and no base64 text starts with it, and
// a publisher offloads any body that does (see [Marked]), so a message of
// the user's own never passes for one.
const PointerMagic = "azdispatch-payload/1 "

// MaxPointerText bounds the text a listener parses as a pointer: a real one
// is about 200 bytes.
const MaxPointerText = 512

// ErrInvalidPointer means a message claims to point at an offloaded
// payload but the pointer is malformed or outside the reader's limits.
// Such a message is poisoned without any blob request.
var ErrInvalidPointer = errors.New("azdispatch: invalid payload pointer")

// Kinds of offloaded payload.
const (
	KindBatch  = "batch"  // many items, one handler call each
	KindSingle = "single" // one message too large for the queue (claim check)
)

// BlobIDLen is the length of a payload blob's name: 128 random bits as
// lowercase hex.
const BlobIDLen = 32

// sha256Len is the length of a SHA-256 sum in hex.
const sha256Len = 64

// Pointer is the message that stands for an offloaded payload. It names the
// blob only by an opaque id: the container is the listener's own, so a
// pointer cannot send a listener to another container, another account, a
// URL or a path.
type Pointer struct {
	Kind   string `json:"kind"`   // KindBatch or KindSingle
	Blob   string `json:"blob"`   // BlobIDLen lowercase hex digits
	Size   int64  `json:"size"`   // bytes of the blob as stored (gzip)
	SHA256 string `json:"sha256"` // of the blob's bytes, lowercase hex
	Items  int    `json:"items"`  // 1 for a single payload
	// Container is the container the blob was written to, said for a
	// person who goes to look at it (with az or Storage Explorer): a
	// listener still reads from its own container, and refuses a pointer
	// that names another. Expanded is the payload's size once
	// decompressed (a single message's text, or a batch's item frames,
	// with their header and lengths). Both are optional: this version
	// reads them and does not write them yet, since a listener of an
	// earlier version refuses a pointer with fields it does not know.
	Container string `json:"container,omitempty"`
	Expanded  int64  `json:"expanded_size,omitempty"`
}

// Limits bound the sizes a pointer may claim, so that a hostile or broken
// pointer is refused before a listener downloads or inflates anything. A
// zero field sets no bound: the zero Limits read a pointer by its format
// alone, as an operator or a poisoning does (a pointer beyond one
// listener's limits may still be requeued to one with larger limits).
type Limits struct {
	MaxBlobSize     int64 // bounds Pointer.Size
	MaxExpandedSize int64 // bounds Pointer.Expanded
	MaxItems        int   // bounds Pointer.Items
}

// orNoBound is limit, or the largest value of its type for a zero limit.
func orNoBound[T int | int64](limit T) T {
	if limit != 0 {
		return limit
	}
	if _, ok := any(limit).(int); ok {
		return T(math.MaxInt)
	}
	return T(math.MaxInt64)
}

// Encode returns the pointer as message text, in its canonical form.
func (p *Pointer) Encode() string {
	b, _ := json.Marshal(p) // a struct of strings and numbers always marshals
	return PointerMagic + string(b)
}

// parsePointer reads and checks a pointer, the whole of text, against lim.
// It makes no request: a pointer that fails here is poisoned without any
// blob being touched. Errors match [ErrInvalidPointer]. [Parse] reads a
// pointer with it.
func parsePointer(text string, lim Limits) (*Pointer, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPointer, fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(text, PointerMagic)
	if !ok {
		return nil, bad("no %q prefix", strings.TrimSpace(PointerMagic))
	}
	maxBlob, maxExpanded, maxItems := orNoBound(lim.MaxBlobSize), orNoBound(lim.MaxExpandedSize), orNoBound(lim.MaxItems)
	if len(text) > MaxPointerText {
		return nil, bad("%d bytes, more than %d", len(text), MaxPointerText)
	}
	var p Pointer
	dec := json.NewDecoder(strings.NewReader(rest))
	dec.DisallowUnknownFields() // a "url" or "account" field is refused, not ignored
	if err := dec.Decode(&p); err != nil {
		return nil, bad("%v", err)
	}
	if dec.More() || strings.TrimSpace(rest[dec.InputOffset():]) != "" {
		return nil, bad("trailing data")
	}
	switch {
	case p.Kind != KindBatch && p.Kind != KindSingle:
		return nil, bad("kind %q", p.Kind)
	case !IsLowerHex(p.Blob, BlobIDLen):
		return nil, bad("blob id %q is not %d lowercase hex digits", xmltext.TruncateUTF8(p.Blob, 80), BlobIDLen)
	case !IsLowerHex(p.SHA256, sha256Len):
		return nil, bad("sha256 is not %d lowercase hex digits", sha256Len)
	case p.Size < 1 || p.Size > maxBlob:
		return nil, bad("size %d is not between 1 and MaxBlobSize %d", p.Size, maxBlob)
	case p.Kind == KindSingle && p.Items != 1:
		return nil, bad("a single payload has %d items", p.Items)
	case p.Items < 1 || p.Items > maxItems:
		return nil, bad("%d items, not between 1 and MaxItems %d", p.Items, maxItems)
	case p.Expanded < 0 || p.Expanded > maxExpanded:
		return nil, bad("expanded size %d is not between 0 and MaxExpandedSize %d", p.Expanded, maxExpanded)
	case p.Container != "" && !validContainer(p.Container):
		return nil, bad("container %q is not a container name", xmltext.TruncateUTF8(p.Container, 80))
	}
	return &p, nil
}

// IsLowerHex reports whether s is n lowercase hexadecimal digits.
func IsLowerHex(s string, n int) bool {
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

// validContainer reports whether name is a blob container name: 3 to 63
// lowercase letters, digits and single hyphens, starting and ending with a
// letter or digit.
func validContainer(name string) bool {
	if len(name) < 3 || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' || strings.Contains(name, "--") {
		return false
	}
	for i := range len(name) {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
