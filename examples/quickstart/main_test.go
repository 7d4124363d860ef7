package main

import "testing"

// The quickstart, smaller: every message must be accounted for.
func TestQuickstartAccountsForEveryMessage(t *testing.T) {
	if err := run(40, false); err != nil {
		t.Fatal(err)
	}
}
