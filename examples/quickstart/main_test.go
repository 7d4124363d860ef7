package main

import (
	"testing"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// The quickstart, smaller: every message must be accounted for.
func TestQuickstartAccountsForEveryMessage(t *testing.T) {
	azurite.SkipIfShort(t)
	if err := run(40, false); err != nil {
		t.Fatal(err)
	}
}
