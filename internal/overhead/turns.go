package overhead

import (
	"context"
	"slices"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Turns drains n messages through each of variants, in turns of n/turns
// messages each, the variants taking turns in an order that is reversed
// every other turn, and returns each variant's figures over all its turns.
// On a shared machine whose neighbours come and go, a drain of one variant
// after another lets a busy spell fall on one of them; short turns spread
// it over all. fill makes the source of one turn.
func Turns(ctx context.Context, variants []string, n, turns int, fill func(ctx context.Context, n int) (azdispatch.Source, error)) (map[string]Result, error) {
	turns = max(min(turns, n), 1)
	each := n / turns
	sum := map[string]Result{}
	order := slices.Clone(variants)
	for range turns {
		for _, v := range order {
			q, err := fill(ctx, each)
			if err != nil {
				return nil, err
			}
			r, err := Drain(ctx, v, q, each)
			if err != nil {
				return nil, err
			}
			s := sum[v]
			s.Variant = v
			s.Messages += r.Messages
			s.Elapsed += r.Elapsed
			s.CPU += r.CPU
			s.Allocs += r.Allocs
			s.Bytes += r.Bytes
			sum[v] = s
		}
		slices.Reverse(order)
	}
	for v, s := range sum {
		per := float64(s.Messages)
		s.CPUPerMsg = float64(s.CPU.Microseconds()) / per
		s.AllocsPerMsg, s.BytesPerMsg = float64(s.Allocs)/per, float64(s.Bytes)/per
		s.MsgsPerS = per / max(s.Elapsed, time.Nanosecond).Seconds()
		sum[v] = s
	}
	return sum, nil
}
