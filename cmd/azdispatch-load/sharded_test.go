package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// Small runs of the sharded and simulated scenarios check them end to end;
// their figures come from running the program.
func TestShardedScenarioRecordsEachAccountCount(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
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

func TestSimulatedScenarioRecordsEachVariant(t *testing.T) {
	o := options{rounds: 1, sim: simTiming{warmup: 500 * time.Millisecond, window: time.Second}}
	recs, _, err := runSimulated(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"publish", "publish-unpaced", "drain", "drain-unpaced"}
	if len(recs) != len(want) {
		t.Fatalf("records %+v", recs)
	}
	for i, r := range recs {
		if r.Variant != want[i] || r.MsgsPerS <= 0 || r.ServerBusy == nil {
			t.Errorf("incomplete record %+v", r)
		}
		// Publishers send round-robin, so every shard has some. (A drain
		// this short, under the race detector on a busy machine, can leave
		// a listener without a turn on the CPU, and its shards at zero.)
		if strings.HasPrefix(r.Variant, "publish") && r.ShardMaxOverMin < 1 {
			t.Errorf("a shard had no sends: %+v", r)
		}
	}
}

func TestIdleShardedScenarioCountsBothVariants(t *testing.T) {
	azurite.SkipIfShort(t)
	o := options{idle: idleTiming{window: 3 * time.Second, ramp: time.Second}}
	recs, _, err := runIdleSharded(context.Background(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Variant != "sharded-10" || recs[1].Variant != "single" {
		t.Fatalf("records %+v", recs)
	}
	for _, r := range recs {
		if r.Requests <= 0 {
			t.Errorf("no requests counted: %+v", r)
		}
	}
}
