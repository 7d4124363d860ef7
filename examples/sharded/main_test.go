package main

import (
	"context"
	"testing"
)

// The example, smaller: two accounts, every job handled, each customer by
// one worker, one distributor at a time.
func TestShardedExampleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Azurite; run without -short")
	}
	if err := run(context.Background(), config{accounts: 2, shards: 4, jobs: 80}); err != nil {
		t.Fatal(err)
	}
}
