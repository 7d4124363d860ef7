package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A small drain run checks the program end to end; the ratios it prints are
// measured by running the program, not asserted here (the machine is shared).
func TestDrainScenarioProducesARecordPerVariant(t *testing.T) {
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
