package allocs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

var sink []byte

func TestBytesCountsWhatTheFunctionAllocates(t *testing.T) {
	// Not parallel: other tests' allocations would count.
	n := Bytes(func() { sink = make([]byte, 1<<20) })
	assert.GreaterOrEqual(t, n, uint64(1<<20))
	assert.Less(t, n, uint64(1<<20+64<<10))
	assert.Less(t, Bytes(func() {}), uint64(64<<10), "nothing allocated, little counted")
}
