package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A sharded queue needs two receives per shard to look at every message.
func TestMemHarnessShardedSweepsTwiceItsShards(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 6, (&MemHarness{Shards: 3}).Behaviour().Sweep)
	assert.Equal(t, 1, (&MemHarness{}).Behaviour().Sweep)
}
