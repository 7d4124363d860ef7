package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traces are the spans recorded, arranged by the message they belong to:
// each send span (a message's creation context) with the spans on the
// consumer side that link to it.
type traces struct {
	sends   []tracetest.SpanStub
	linked  map[trace.SpanID][]tracetest.SpanStub // by the send span they link to
	process []tracetest.SpanStub
}

func newTraces(spans tracetest.SpanStubs) *traces {
	t := &traces{linked: map[trace.SpanID][]tracetest.SpanStub{}}
	for _, s := range spans {
		switch {
		case strings.HasPrefix(s.Name, "send "):
			t.sends = append(t.sends, s)
		case strings.HasPrefix(s.Name, "process "):
			t.process = append(t.process, s)
		}
		for _, l := range s.Links {
			t.linked[l.SpanContext.SpanID()] = append(t.linked[l.SpanContext.SpanID()], s)
		}
	}
	byStart := func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) }
	slices.SortFunc(t.sends, byStart)
	for _, spans := range t.linked {
		slices.SortFunc(spans, byStart)
	}
	return t
}

// linkedToProducer counts the process spans linked to a recorded send span.
func (t *traces) linkedToProducer() int {
	sends := map[trace.SpanID]bool{}
	for _, s := range t.sends {
		sends[s.SpanContext.SpanID()] = true
	}
	n := 0
	for _, p := range t.process {
		if slices.ContainsFunc(p.Links, func(l sdktrace.Link) bool { return sends[l.SpanContext.SpanID()] }) {
			n++
		}
	}
	return n
}

// print writes each message's trace as a tree: the send, then what links
// to it, in the order it started.
func (t *traces) print(w io.Writer) {
	for _, s := range t.sends {
		fmt.Fprintf(w, "%s  trace %s\n", describe(s), s.SpanContext.TraceID().String()[:8])
		children := t.linked[s.SpanContext.SpanID()]
		for i, c := range children {
			branch := "├─"
			if i == len(children)-1 {
				branch = "└─"
			}
			fmt.Fprintf(w, "  %s %s  trace %s\n", branch, describe(c), c.SpanContext.TraceID().String()[:8])
		}
	}
}

// describe is one line for a span: its name, what it did and how long it took.
func describe(s tracetest.SpanStub) string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, kv := range s.Attributes {
		switch kv.Key {
		case "messaging.message.id":
			fmt.Fprintf(&b, " id=%.8s…", kv.Value.AsString())
		case "messaging.batch.message_count":
			fmt.Fprintf(&b, " messages=%d", kv.Value.AsInt64())
		case "azdispatch.message.offloaded":
			if kv.Value.AsBool() {
				b.WriteString(" offloaded")
			}
		case "azdispatch.batch.item":
			fmt.Fprintf(&b, " item=%d", kv.Value.AsInt64())
		case "error.type":
			fmt.Fprintf(&b, " error=%s", kv.Value.AsString())
		}
	}
	fmt.Fprintf(&b, "  %v", s.EndTime.Sub(s.StartTime).Round(10*time.Microsecond))
	return b.String()
}
