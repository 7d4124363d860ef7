package main

import "testing"

// The quickstart, smaller: every message must be accounted for.
func TestQuickstartAccountsForEveryMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Azurite; run without -short")
	}
	if err := run(40, false); err != nil {
		t.Fatal(err)
	}
}
