package main

import (
	"context"
	"io"
	"testing"
	"time"
)

// Small runs of the sharded and simulated scenarios check them end to end;
// their figures come from running the program.
func TestShardedScenarioRecordsEachAccountCount(t *testing.T) {
	o := options{messages: 40, rounds: 1, limit: 60 * time.Second}
	recs, _, err := runSharded(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("got %d records", len(recs))
	}
	for i, r := range recs {
		if r.MsgsPerS <= 0 || r.AzuriteCPUS <= 0 || len(r.AzuriteCPUEach) != i+1 {
			t.Errorf("incomplete record %+v", r)
		}
	}
}

func TestSimulatedScenarioPublishesEvenly(t *testing.T) {
	recs, _, err := runSimulated(context.Background(), options{rounds: 1}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Variant != "publish" || recs[1].Variant != "drain" {
		t.Fatalf("records %+v", recs)
	}
	for _, r := range recs {
		if r.MsgsPerS <= 0 || r.ShardMaxOverMin < 1 {
			t.Errorf("incomplete record %+v", r)
		}
	}
}
