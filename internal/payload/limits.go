package payload

import "errors"

// Limits bound what is offloaded and what a listener reads back, so that a
// hostile or broken pointer cannot make a listener download, inflate or
// decode without limit. A zero field means its default (see WithDefaults).
// A publisher refuses, before any request, a payload a listener with the
// same limits would poison.
type Limits struct {
	// MaxBlobSize bounds a payload blob's stored (gzip) size; a listener
	// holds one blob of each batch in progress in memory. Defaults to 64 MiB.
	MaxBlobSize int64
	// MaxExpandedSize bounds a payload's size once decompressed, which stops
	// gzip bombs: the listener stops reading past it. Defaults to 256 MiB.
	MaxExpandedSize int64
	// MaxItemSize bounds one item's encoded text (or a single large
	// message's), the most a listener decodes at once. Defaults to 16 MiB.
	MaxItemSize int
	// MaxItems bounds the items of one batch. Defaults to 1,000,000.
	MaxItems int
}

// Default limits, for the fields of Limits left zero.
const (
	DefaultMaxBlobSize     = 64 << 20
	DefaultMaxExpandedSize = 256 << 20
	DefaultMaxItemSize     = 16 << 20
	DefaultMaxItems        = 1_000_000
)

// WithDefaults returns l with its zero fields set to their defaults. It fails
// when a field is negative; the error names no field, so that the caller can
// say where the limits came from.
func (l Limits) WithDefaults() (Limits, error) {
	setDefault(&l.MaxBlobSize, DefaultMaxBlobSize)
	setDefault(&l.MaxExpandedSize, DefaultMaxExpandedSize)
	setDefault(&l.MaxItemSize, DefaultMaxItemSize)
	setDefault(&l.MaxItems, DefaultMaxItems)
	if l.MaxBlobSize < 1 || l.MaxExpandedSize < 1 || l.MaxItemSize < 1 || l.MaxItems < 1 {
		return l, errors.New("limits must be positive")
	}
	return l, nil
}

// setDefault sets *v to def when it is zero.
func setDefault[T int | int64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}
