package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

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

// points are a metric's data points: sums as numbers, histograms as their
// count and sum.
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
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			out = append(out, point{dp.Attributes, fmt.Sprintf("count %d, sum %.4f s", dp.Count, dp.Sum)})
		}
	}
	return out
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
}

func summarize(t *traces, m metrics, queueMessages, calls int) summary {
	s := summary{QueueMessages: queueMessages, HandlerCalls: calls, ProcessSpans: len(t.process), LinkedToProducer: t.linkedToProducer(),
		SendSpans: len(t.sends), Metrics: m.names(), Transactions: m.transactions()}
	for _, send := range t.sends {
		for _, kv := range send.Attributes {
			if kv.Key == "azdispatch.message.offloaded" && kv.Value.AsBool() {
				s.ClaimChecked++
			}
		}
	}
	return s
}
