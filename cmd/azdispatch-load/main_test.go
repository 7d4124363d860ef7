package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// TestMain lets the chaos and schedule tests run this test binary again as
// a worker process, as the program runs itself, and fails a run whose tests pass but
// leave a goroutine running.
func TestMain(m *testing.M) {
	if code, ok := runRole(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// A small drain run checks the program end to end; the ratios it prints are
// measured by running the program, not asserted here (the machine is shared).
func TestDrainScenarioProducesARecordPerVariant(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	o := options{messages: 40, rounds: 1, limit: 30 * time.Second}
	recs, lines, err := runDrain(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(drainVariants) || len(lines) == 0 {
		t.Fatalf("got %d records, %d lines", len(recs), len(lines))
	}
	for _, r := range recs {
		if r.Scenario != "drain" || r.MsgsPerS <= 0 || r.TxPerMsg <= 0 {
			t.Errorf("incomplete record %+v", r)
		}
	}
	if recs[0].Variant != "listener" || recs[0].Ratios["listener_over_raw"] <= 0 {
		t.Errorf("the listener record carries the ratios: %+v", recs[0])
	}
}
