package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// metrics are the metrics collected once, by name.
type metrics map[string]metricdata.Metrics

func collect(ctx context.Context, r *sdkmetric.ManualReader) (metrics, error) {
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return nil, err
	}
	m := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, x := range sm.Metrics {
			m[x.Name] = x
		}
	}
	return m, nil
}

// names are the metric names, sorted.
func (m metrics) names() []string { return slices.Sorted(maps.Keys(m)) }

// point is one data point, flattened for printing.
type point struct {
	attrs attribute.Set
	value string
}

// points are a metric's data points: sums and gauges as numbers,
// histograms as their count and sum, and the message times' histograms
// with their buckets that are not empty as well.
func (m metrics) points(name string) []point {
	var out []point
	switch d := m[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, fmt.Sprint(dp.Value)})
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, fmt.Sprint(dp.Value)})
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, fmt.Sprintf("%g %s", dp.Value, m[name].Unit)})
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			v := fmt.Sprintf("count %d, sum %.4f s", dp.Count, dp.Sum)
			if strings.HasPrefix(name, "azdispatch.message.") {
				v += "; " + describeBuckets(dp.Bounds, dp.BucketCounts)
			}
			out = append(out, point{dp.Attributes, v})
		}
	}
	return out
}

// describeBuckets lists the buckets that are not empty, by their upper
// bound: "≤1s: 5, ≤2s: 2".
func describeBuckets(bounds []float64, counts []uint64) string {
	var parts []string
	for i, n := range counts {
		if n == 0 {
			continue
		}
		le := "+Inf"
		if i < len(bounds) {
			le = fmt.Sprintf("%gs", bounds[i])
		}
		parts = append(parts, fmt.Sprintf("≤%s: %d", le, n))
	}
	return strings.Join(parts, ", ")
}

// histogram is a histogram's points summed, for the -json record.
type histogram struct {
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum_s"`
	Bounds []float64 `json:"bounds_s"` // upper bounds of the buckets but the last, which has none
	Counts []uint64  `json:"counts"`   // per bucket: one more than Bounds
}

// histogram sums the points of the histogram name (which must share their
// bounds, as one instrument's do); nil if it has none.
func (m metrics) histogram(name string) *histogram {
	d, ok := m[name].Data.(metricdata.Histogram[float64])
	if !ok || len(d.DataPoints) == 0 {
		return nil
	}
	h := &histogram{Bounds: d.DataPoints[0].Bounds, Counts: make([]uint64, len(d.DataPoints[0].BucketCounts))}
	for _, dp := range d.DataPoints {
		h.Count += dp.Count
		h.Sum += dp.Sum
		for i, n := range dp.BucketCounts {
			h.Counts[i] += n
		}
	}
	return h
}

// gauge is the value of the float gauge name; nil if it has no point.
func (m metrics) gauge(name string) *float64 {
	d, ok := m[name].Data.(metricdata.Gauge[float64])
	if !ok || len(d.DataPoints) == 0 {
		return nil
	}
	return &d.DataPoints[0].Value
}

// transactions sums azdispatch.storage.transactions by kind.
func (m metrics) transactions() map[string]int64 {
	out := map[string]int64{}
	if d, ok := m["azdispatch.storage.transactions"].Data.(metricdata.Sum[int64]); ok {
		for _, dp := range d.DataPoints {
			kind, _ := dp.Attributes.Value("azdispatch.transaction.kind")
			out[kind.AsString()] += dp.Value
		}
	}
	return out
}

// print writes every data point of every metric, the attributes that vary
// between points shown.
func (m metrics) print(w io.Writer) {
	for _, name := range m.names() {
		fmt.Fprintln(w, name)
		for _, p := range m.points(name) {
			fmt.Fprintf(w, "  %-60s %s\n", describeAttrs(p.attrs), p.value)
		}
	}
}

// describeAttrs is the attributes of a point, without those every point
// of this example shares.
func describeAttrs(s attribute.Set) string {
	out := ""
	for _, kv := range s.ToSlice() {
		switch kv.Key {
		case "messaging.system", "messaging.destination.name", "azdispatch.account":
			continue
		}
		if out != "" {
			out += " "
		}
		out += string(kv.Key) + "=" + kv.Value.Emit()
	}
	if out == "" {
		return "(all)"
	}
	return out
}

// summary is the -json record.
type summary struct {
	QueueMessages    int              `json:"queue_messages"`     // messages put on the queue: a batch is one
	HandlerCalls     int              `json:"handler_calls"`      // handler calls: single messages and batch items
	ProcessSpans     int              `json:"process_spans"`      // process spans recorded
	LinkedToProducer int              `json:"linked_to_producer"` // of them, linked to a recorded send span
	SendSpans        int              `json:"send_spans"`
	ClaimChecked     int              `json:"claim_checked"` // send spans of offloaded bodies (the large message and the batch)
	Metrics          []string         `json:"metrics"`
	Transactions     map[string]int64 `json:"transactions"` // billable requests by kind, from azdispatch.storage.transactions
	// FirstDeliveryCalls are the handler calls on a message's first
	// delivery: those TimeInQueue counts.
	FirstDeliveryCalls int        `json:"first_delivery_calls"`
	TimeInQueue        *histogram `json:"time_in_queue"` // azdispatch.message.time_in_queue
	EndToEnd           *histogram `json:"end_to_end"`    // azdispatch.message.end_to_end
	// OldestAge is azdispatch.queue.oldest_age, in seconds: read before the
	// listener ran, while the messages waited; null if it was not read.
	OldestAge *float64 `json:"oldest_age_s"`
}

func summarize(t *traces, m metrics, queueMessages, calls, firstDeliveryCalls int) summary {
	s := summary{QueueMessages: queueMessages, HandlerCalls: calls, ProcessSpans: len(t.process), LinkedToProducer: t.linkedToProducer(),
		SendSpans: len(t.sends), Metrics: m.names(), Transactions: m.transactions(),
		FirstDeliveryCalls: firstDeliveryCalls, TimeInQueue: m.histogram("azdispatch.message.time_in_queue"),
		EndToEnd: m.histogram("azdispatch.message.end_to_end"), OldestAge: m.gauge("azdispatch.queue.oldest_age")}
	for _, send := range t.sends {
		for _, kv := range send.Attributes {
			if kv.Key == "azdispatch.message.offloaded" && kv.Value.AsBool() {
				s.ClaimChecked++
			}
		}
	}
	return s
}
