package azdispatch_test

import (
	"context"
	"testing"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/overhead"
)

// BenchmarkOverhead drains b.N small JSON messages, with a handler that
// does nothing, through a Listener with its defaults and through minimal
// hand-written loops: receive 32, a goroutine per message under a 64-wide
// semaphore, decode, delete (raw); the same on 64 long-lived goroutines
// (raw-pool); and one goroutine that receives, decodes, calls the handler
// and deletes in turn (raw-loop, the floor). The difference is the
// listener's own cost per message.
//
// Each runs over two sources: a memqueue filled in advance (memqueue), and
// a minimal source that makes its messages as they are received and keeps
// none (stream), where the garbage collector's work is the consumer's own
// rather than marking every message still queued. Compare the lines of one
// run:
//
//	go test -run '^$' -bench Overhead -benchmem .
//
// The load test's overhead scenario runs the same drains interleaved, in
// rounds, and prints the ratios.
func BenchmarkOverhead(b *testing.B) {
	sources := []struct {
		name string
		fill func(ctx context.Context, n int) (azdispatch.Source, error)
	}{
		{"memqueue", func(ctx context.Context, n int) (azdispatch.Source, error) { return overhead.Fill(ctx, n) }},
		{"stream", func(_ context.Context, n int) (azdispatch.Source, error) { return overhead.NewStream(n), nil }},
	}
	for _, src := range sources {
		for _, variant := range overhead.Variants {
			b.Run(src.name+"/"+variant, func(b *testing.B) {
				ctx := context.Background()
				q, err := src.fill(ctx, b.N)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				r, err := overhead.Drain(ctx, variant, q, b.N)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.CPUPerMsg, "cpu-µs/msg")
				b.ReportMetric(r.MsgsPerS, "msgs/s")
			})
		}
	}
}

// BenchmarkOverheadTurns drains b.N messages through the listener and
// through the floor (raw-loop), in turns of 200,000 that alternate between
// them, and reports the listener's CPU per message as a multiple of the
// floor's: on a shared machine, whose neighbours slow one drain and not
// the next, a ratio of drains taken in turns holds still where one of two
// drains run one after the other does not. For the figures the README
// and BENCHMARKS.md quote:
//
//	GOMAXPROCS=1 go test -run '^$' -bench 'OverheadTurns/stream' -benchtime 3000000x .
func BenchmarkOverheadTurns(b *testing.B) {
	fills := []struct {
		name string
		fill func(ctx context.Context, n int) (azdispatch.Source, error)
	}{
		{"memqueue", func(ctx context.Context, n int) (azdispatch.Source, error) { return overhead.Fill(ctx, n) }},
		{"stream", func(_ context.Context, n int) (azdispatch.Source, error) { return overhead.NewStream(n), nil }},
	}
	for _, f := range fills {
		b.Run(f.name, func(b *testing.B) {
			variants := []string{overhead.Listener, overhead.RawLoop}
			rs, err := overhead.Turns(context.Background(), variants, b.N, max(b.N/200_000, 1), f.fill)
			if err != nil {
				b.Fatal(err)
			}
			l, floor := rs[overhead.Listener], rs[overhead.RawLoop]
			b.ReportMetric(l.CPUPerMsg, "listener-cpu-µs/msg")
			b.ReportMetric(floor.CPUPerMsg, "raw-loop-cpu-µs/msg")
			b.ReportMetric(float64(l.CPU)/float64(floor.CPU), "listener÷raw-loop-cpu")
			b.ReportMetric(l.AllocsPerMsg, "listener-allocs/msg")
			b.ReportMetric(l.BytesPerMsg, "listener-B/msg")
		})
	}
}
