package main

import (
	"os"
	"testing"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// The quickstart, smaller: every message must be accounted for.
func TestQuickstartAccountsForEveryMessage(t *testing.T) {
	azurite.SkipIfShort(t)
	// The test suite's account, if it names one; never the one a
	// developer keeps for real work in AZURE_STORAGE_CONNECTION_STRING.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", os.Getenv(azurite.EnvConnectionString))
	if err := run(40, false); err != nil {
		t.Fatal(err)
	}
}
