package overhead

import (
	"context"
	"testing"
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
