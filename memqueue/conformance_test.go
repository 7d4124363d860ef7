package memqueue_test

import (
	"testing"

	"github.com/azdispatch/azdispatch/internal/conformance"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// TestConformance checks memqueue against the same suite as Azurite (see
// the root package's TestConformanceAzurite), on ManualClocks, so that its
// semantics are checked rather than assumed.
func TestConformance(t *testing.T) {
	t.Parallel()
	h := &conformance.MemHarness{}
	sourcetest.Run(t, h)
	sourcetest.RunListener(t, h)
}

// TestConformanceSharded runs the suite against an azdispatch.ShardedQueue
// over three memqueues: a sharded queue must keep the contract of one
// queue, although each receive may read one shard only.
func TestConformanceSharded(t *testing.T) {
	t.Parallel()
	h := &conformance.MemHarness{Shards: 3}
	sourcetest.Run(t, h)
	sourcetest.RunListener(t, h)
}
