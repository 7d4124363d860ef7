package payload

import "errors"

// Sentinel errors. Test for them with errors.Is; the errors this package
// returns wrap them together with the details.
var (
	// ErrInvalidPointer means a message claims to point at an offloaded
	// payload but the pointer is malformed or outside the reader's limits.
	// Such a message is poisoned without any blob request.
	ErrInvalidPointer = errors.New("azdispatch: invalid payload pointer")

	// ErrCorrupt means a payload blob does not match its pointer (size or
	// SHA-256) or cannot be read as a payload. The message is poisoned and
	// the blob kept for inspection.
	ErrCorrupt = errors.New("azdispatch: payload blob is corrupt")

	// ErrTooLarge means a payload exceeds its Limits: a publisher refuses it
	// before any request, a listener poisons it.
	ErrTooLarge = errors.New("azdispatch: payload exceeds its limits")
)
