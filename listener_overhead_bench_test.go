package azdispatch_test

import (
	"context"
	"testing"

	"github.com/azdispatch/azdispatch/internal/overhead"
)

// BenchmarkOverhead drains an in-memory queue of b.N small JSON messages,
// with a handler that does nothing, through a Listener with its defaults and
// through minimal hand-written loops: receive 32, a goroutine per message
// under a 64-wide semaphore, decode, delete (raw); the same on 64 long-lived
// goroutines (raw-pool); and one goroutine that receives, decodes, calls the
// handler and deletes in turn (raw-loop, the floor). The difference is the
// listener's own cost per message. Compare the lines of one run:
//
//	go test -run '^$' -bench Overhead -benchmem .
//
// The load test's overhead scenario runs the same drains interleaved, in
// rounds, and prints the ratios.
func BenchmarkOverhead(b *testing.B) {
	for _, variant := range overhead.Variants {
		b.Run(variant, func(b *testing.B) {
			ctx := context.Background()
			q, err := overhead.Fill(ctx, b.N)
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
