package overhead

import (
	"context"
	"testing"

	"github.com/azdispatch/azdispatch"
)

// Every variant drains the whole queue and reports figures for it; how
// large they are is for the benchmark, not a test, to say.
func TestEveryVariantDrainsTheQueue(t *testing.T) {
	ctx := context.Background()
	for _, v := range Variants {
		q, err := Fill(ctx, 500)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Drain(ctx, v, q, 500)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if n, err := q.Depth(ctx); err != nil || n != 0 {
			t.Fatalf("%s left %d messages (%v)", v, n, err)
		}
		if r.Messages != 500 || r.MsgsPerS <= 0 || r.AllocsPerMsg <= 0 {
			t.Fatalf("%s: implausible result %+v", v, r)
		}
	}
	if _, err := Drain(ctx, "nonesuch", nil, 1); err == nil {
		t.Fatal("an unknown variant should be refused")
	}
}

// Turns adds up each variant's turns: every message of every turn is
// counted once, for every variant.
func TestTurnsCountEveryMessageOfEveryVariant(t *testing.T) {
	ctx := context.Background()
	streams := 0
	rs, err := Turns(ctx, []string{Listener, RawLoop}, 1000, 4, func(_ context.Context, n int) (azdispatch.Source, error) {
		streams++
		return NewStream(n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if streams != 8 {
		t.Fatalf("%d sources made, want one per variant and turn, 8", streams)
	}
	for _, v := range []string{Listener, RawLoop} {
		if r := rs[v]; r.Messages != 1000 || r.CPUPerMsg < 0 || r.MsgsPerS <= 0 {
			t.Fatalf("%s: %+v", v, r)
		}
	}
}
