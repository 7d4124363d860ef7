package payload

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// BlobIDLen is the length of a payload blob's name, as a pointer names it
// (see wire.BlobIDLen).
const BlobIDLen = wire.BlobIDLen

// Kinds of payload blob: those a pointer names (see wire.KindBatch), beside
// the kinds of record.
const (
	KindBatch  = wire.KindBatch
	KindSingle = wire.KindSingle
)

// NewBlobID returns a fresh opaque blob name: BlobIDLen lowercase hex digits
// of crypto/rand.
func NewBlobID() string {
	b := make([]byte, BlobIDLen/2)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// IsLowerHex reports whether s is n lowercase hexadecimal digits, as a blob's
// name is (see wire.IsLowerHex).
func IsLowerHex(s string, n int) bool { return wire.IsLowerHex(s, n) }

// PointerLimits are the bounds of l that a pointer's claims are read
// against (see wire.Limits).
func (l Limits) PointerLimits() wire.Limits {
	return wire.Limits{MaxBlobSize: l.MaxBlobSize, MaxExpandedSize: l.MaxExpandedSize, MaxItems: l.MaxItems}
}
