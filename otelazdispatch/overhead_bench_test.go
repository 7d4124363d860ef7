package otelazdispatch_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/overhead"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// BenchmarkInstrumentationOverhead drains an in-memory queue of small
// messages through a listener with no middleware, with the Instrumentation
// on OpenTelemetry's no-op providers (the API's cost alone), and with the
// SDK recording every span and metric in memory: what tracing costs per
// message, against the bare listener in the same run.
//
//	go test -run '^$' -bench InstrumentationOverhead -benchmem ./otelazdispatch
func BenchmarkInstrumentationOverhead(b *testing.B) {
	variants := []struct {
		name string
		mw   func(b *testing.B) []azdispatch.Middleware
	}{
		{"none", func(*testing.B) []azdispatch.Middleware { return nil }},
		{"otel-noop", func(b *testing.B) []azdispatch.Middleware {
			inst, err := otelazdispatch.New(nil) // the global providers: no-ops until an SDK is installed
			if err != nil {
				b.Fatal(err)
			}
			return []azdispatch.Middleware{inst}
		}},
		{"otel-sdk", func(b *testing.B) []azdispatch.Middleware {
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			inst, err := otelazdispatch.New(&otelazdispatch.Options{TracerProvider: tp, MeterProvider: mp})
			if err != nil {
				b.Fatal(err)
			}
			return []azdispatch.Middleware{inst}
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			q, err := overhead.Fill(ctx, b.N)
			if err != nil {
				b.Fatal(err)
			}
			opts := &azdispatch.ListenerOptions{Middleware: v.mw(b)}
			b.ReportAllocs()
			b.ResetTimer()
			r, err := overhead.DrainListener(ctx, q, b.N, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.CPUPerMsg, "cpu-µs/msg")
			b.ReportMetric(r.MsgsPerS, "msgs/s")
		})
	}
}
