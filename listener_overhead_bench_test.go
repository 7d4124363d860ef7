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
