package payload

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is; the errors this package
// returns wrap them together with the details.
var (
	// ErrCorrupt means a payload blob does not match its pointer (size or
	// SHA-256) or cannot be read as a payload. The message is poisoned and
	// the blob kept for inspection.
	ErrCorrupt = errors.New("azdispatch: payload blob is corrupt")

	// ErrTooLarge means something is too large: a payload beyond its Limits
	// (a publisher refuses it before any request, a listener poisons it),
	// or a message beyond what a queue takes. Every error of a size over a
	// limit matches it, whatever the limit.
	ErrTooLarge = errors.New("azdispatch: too large")
)

// LimitError is a payload over one of its Limits. It matches ErrTooLarge.
type LimitError struct {
	Limit string // the field of Limits: "MaxItemSize", "MaxItems", "MaxExpandedSize" or "MaxBlobSize"
	What  string // what is over it: "item 3", "the payload"
	Size  int64  // its size (bytes, or items for MaxItems); 0 if not known, only that it is over
	Max   int64  // the limit
}

// Error says what is over which limit, and by how much.
func (e *LimitError) Error() string {
	unit := "bytes"
	if e.Limit == "MaxItems" {
		unit = "items"
	}
	if e.Size == 0 {
		return fmt.Sprintf("%s: %s is more than %s (%d %s)", ErrTooLarge, e.What, e.Limit, e.Max, unit)
	}
	return fmt.Sprintf("%s: %s is %d %s, more than %s (%d)", ErrTooLarge, e.What, e.Size, unit, e.Limit, e.Max)
}

// Is reports whether target is ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }
