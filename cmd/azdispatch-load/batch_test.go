package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A small batch run checks the scenario end to end; its figures are measured
// by running the program, not asserted here (the machine is shared).
func TestBatchScenarioProducesARecordPerVariant(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	*batchItems, *singleItems, *batchSize = 2000, 50, 1000
	o := options{rounds: 1, limit: 60 * time.Second}
	recs, lines, err := runBatch(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || len(lines) == 0 {
		t.Fatalf("got %d records, %d lines", len(recs), len(lines))
	}
	want := map[string]int{"single": 50, "batch-1000": 2000}
	for _, r := range recs {
		if r.Scenario != "batch" || r.MsgsPerS <= 0 || r.TxPerMsg <= 0 || r.Messages != want[r.Variant] {
			t.Errorf("incomplete record %+v", r)
		}
	}
}
