package main

import (
	"context"
	"fmt"
	"io"

	"github.com/azdispatch/azdispatch/internal/overhead"
)

// The overhead scenario: what the Listener itself costs per message. It
// drains an in-memory queue (memqueue: no storage time at all) of small
// JSON messages with a handler that does nothing, through a Listener with
// its defaults, through a minimal hand-written loop (receive 32, a goroutine
// per message under a 64-wide semaphore, decode, delete) and through the
// same loop on 64 long-lived goroutines. The variants take turns, round
// after round, so that whatever else the machine does falls on all of them;
// the medians are compared as ratios.
const (
	overheadMessages = 200_000
	overheadRounds   = 5
)

func runOverhead(ctx context.Context, _ options, progress io.Writer) ([]record, []string, error) {
	runs := map[string][]overhead.Result{}
	for round := range overheadRounds {
		for _, v := range overhead.Variants {
			q, err := overhead.Fill(ctx, overheadMessages)
			if err != nil {
				return nil, nil, err
			}
			r, err := overhead.Drain(ctx, v, q, overheadMessages)
			if err != nil {
				return nil, nil, err
			}
			fmt.Fprintf(progress, "overhead round %d %-8s %6.2f µs CPU/msg %5.1f allocs/msg %6.0f B/msg %8.0f msgs/s\n",
				round+1, v, r.CPUPerMsg, r.AllocsPerMsg, r.BytesPerMsg, r.MsgsPerS)
			runs[v] = append(runs[v], r)
		}
	}
	med := map[string]overhead.Result{}
	for v, rs := range runs {
		of := func(f func(overhead.Result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		med[v] = overhead.Result{
			Variant:      v,
			CPUPerMsg:    of(func(r overhead.Result) float64 { return r.CPUPerMsg }),
			AllocsPerMsg: of(func(r overhead.Result) float64 { return r.AllocsPerMsg }),
			BytesPerMsg:  of(func(r overhead.Result) float64 { return r.BytesPerMsg }),
			MsgsPerS:     of(func(r overhead.Result) float64 { return r.MsgsPerS }),
		}
	}
	l := med[overhead.Listener]
	var recs []record
	lines := []string{fmt.Sprintf("listener's own cost, %d messages of %d B JSON per run, medians of %d rounds:", overheadMessages, len(overhead.Text), overheadRounds)}
	for _, v := range overhead.Variants {
		m := med[v]
		rec := record{Scenario: "overhead", Variant: v, Messages: overheadMessages,
			CPUUsPerMsg: m.CPUPerMsg, AllocsPerMsg: m.AllocsPerMsg, BytesPerMsg: m.BytesPerMsg, MsgsPerS: m.MsgsPerS}
		line := fmt.Sprintf("  %-8s %6.2f µs CPU/msg  %5.1f allocs/msg  %6.0f B/msg  %8.0f msgs/s", v, m.CPUPerMsg, m.AllocsPerMsg, m.BytesPerMsg, m.MsgsPerS)
		if v != overhead.Listener {
			// The listener's figures as multiples of this floor's.
			rec.Ratios = map[string]float64{
				"listener_cpu":    l.CPUPerMsg / m.CPUPerMsg,
				"listener_allocs": l.AllocsPerMsg / m.AllocsPerMsg,
				"listener_rate":   l.MsgsPerS / m.MsgsPerS,
			}
			line += fmt.Sprintf("   listener ÷ this: CPU %.2f×, allocs %.2f×, msgs/s %.2f×",
				rec.Ratios["listener_cpu"], rec.Ratios["listener_allocs"], rec.Ratios["listener_rate"])
		}
		recs = append(recs, rec)
		lines = append(lines, line)
	}
	return recs, lines, nil
}
