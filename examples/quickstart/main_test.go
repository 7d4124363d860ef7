package main

import (
	"os"
	"testing"
)

// The quickstart, smaller: every message must be accounted for.
func TestQuickstartAccountsForEveryMessage(t *testing.T) {
	if testing.Short() {
		if os.Getenv("AZDISPATCH_REQUIRE_AZURITE") != "" {
			t.Fatal("AZDISPATCH_REQUIRE_AZURITE is set: run without -short, with Azurite")
		}
		t.Skip("runs against Azurite (Node.js): run without -short")
	}
	// The test suite's account, if it names one; never the one a
	// developer keeps for real work in AZURE_STORAGE_CONNECTION_STRING.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", os.Getenv("AZDISPATCH_CONNECTION_STRING"))
	if err := run(40, false); err != nil {
		t.Fatal(err)
	}
}
