package main

import (
	"context"
	"os"
	"testing"
)

// The example, smaller: two accounts, every job handled, each customer by
// one worker, one distributor at a time.
func TestShardedExampleEndToEnd(t *testing.T) {
	if testing.Short() {
		if os.Getenv("AZDISPATCH_REQUIRE_AZURITE") != "" {
			t.Fatal("AZDISPATCH_REQUIRE_AZURITE is set: run without -short, with Azurite")
		}
		t.Skip("runs against Azurite (Node.js): run without -short")
	}
	// The test suite's account, if it names one; never the one a
	// developer keeps for real work in AZURE_STORAGE_CONNECTION_STRING.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", os.Getenv("AZDISPATCH_CONNECTION_STRING"))
	if err := run(context.Background(), config{accounts: 2, shards: 4, jobs: 80}); err != nil {
		t.Fatal(err)
	}
}
