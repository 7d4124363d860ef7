package cputime

import (
	"testing"
	"time"
)

func TestSelfGrowsWithWork(t *testing.T) {
	before, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	// Burn some CPU; the clock ticks at 1–10 ms on every platform.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	after, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU time did not grow: %v then %v", before, after)
	}
}
