package payload

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewBlobIDIsFreshLowerHex(t *testing.T) {
	t.Parallel()
	a, b := NewBlobID(), NewBlobID()
	assert.True(t, IsLowerHex(a, BlobIDLen), a)
	assert.True(t, IsLowerHex(b, BlobIDLen), b)
	assert.NotEqual(t, a, b)
}
