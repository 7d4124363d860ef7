package main

import (
	"context"
	"testing"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// The example, smaller: two accounts, every job handled, each customer by
// one worker, one distributor at a time.
func TestShardedExampleEndToEnd(t *testing.T) {
	azurite.SkipIfShort(t)
	if err := run(context.Background(), config{accounts: 2, shards: 4, jobs: 80}); err != nil {
		t.Fatal(err)
	}
}
