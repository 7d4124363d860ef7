// Command observe shows a publisher and a listener traced and measured with
// OpenTelemetry: it sends a few messages (one too large for the queue,
// which goes by claim check, and one batch) with the trace context carried
// in the messages, processes them, and prints each message's trace across
// the queue (send, then the receive, process and settle spans linked to it)
// and the metrics, among them how long messages waited in the queue and
// the age of the oldest one. The OpenTelemetry SDK keeps everything in
// memory here; a service would export it instead.
//
// It starts a private Azurite (the Azure Storage emulator) unless
// AZURE_STORAGE_CONNECTION_STRING names a running emulator or a storage account.
//
//	go run ./examples/observe         # the traces as trees, and the metrics
//	go run ./examples/observe -json   # one record, for scripts
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// Order is the message type.
type Order struct {
	ID   int    `json:"id"`
	Note string `json:"note,omitempty"`
}

func main() {
	messages := flag.Int("messages", 3, "small messages to send, besides one large message and one batch of 3")
	asJSON := flag.Bool("json", false, "print one JSON record instead of the trees")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *messages, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "observe:", err)
		os.Exit(1)
	}
}

// batchItems is the size of the batch the example sends.
const batchItems = 3

func run(ctx context.Context, out io.Writer, small int, asJSON bool) error {
	cs, _, stop, err := connectionString(ctx)
	if err != nil {
		return err
	}
	defer stop()
	account, err := azdispatch.NewAccountFromConnectionString(cs, nil)
	if err != nil {
		return err
	}
	queue, err := account.Queue(fmt.Sprintf("observe-%d", time.Now().UnixNano()%1e9))
	if err != nil {
		return err
	}

	// The SDK, in memory: spans as they end, metrics when collected.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(ctx) }()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()

	// One Instrumentation for the publisher and the listener. Propagate
	// carries the trace context in the messages: opt-in, because it adds a
	// line to the message text that other readers of the queue would see.
	inst, err := otelazdispatch.New(&otelazdispatch.Options{TracerProvider: tp, MeterProvider: mp, Propagate: true})
	if err != nil {
		return err
	}
	accounts, err := inst.ObserveAccounts(account)
	if err != nil {
		return err
	}
	defer func() { _ = accounts.Unregister() }()

	publisher, err := azdispatch.NewPublisher[Order](queue, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{inst},
	})
	if err != nil {
		return err
	}
	for i := range small {
		if _, err := publisher.Send(ctx, Order{ID: i}); err != nil {
			return err
		}
	}
	// Too large for a queue message: offloaded to a blob, a pointer sent.
	large := Order{ID: small, Note: strings.Repeat("x", azdispatch.MaxMessageSize)}
	if _, err := publisher.Send(ctx, large); err != nil {
		return err
	}
	batch := make([]Order, batchItems)
	for i := range batch {
		batch[i] = Order{ID: small + 1 + i}
	}
	if _, err := publisher.SendBatch(ctx, batch, nil); err != nil {
		return err
	}
	queueMessages, calls := small+2, small+1+batchItems

	// The age of the message at the front of the queue. Each reading is a
	// billable peek, made at most once per 30 s however often metrics are
	// collected: a service calls this in one instance, not in every
	// listener. Read here, while the messages wait; the collection at the
	// end, within 30 s, shows the same reading again.
	age, err := inst.ObserveAge(queue, nil)
	if err != nil {
		return err
	}
	defer func() { _ = age.Unregister() }()
	if _, err := collect(ctx, reader); err != nil {
		return err
	}

	var handled, firstDeliveries atomic.Int64
	allHandled := make(chan struct{})
	listener, err := azdispatch.NewListener(queue, func(ctx context.Context, m *azdispatch.Message[Order]) error {
		if m.DequeueCount == 1 {
			firstDeliveries.Add(1) // the calls azdispatch.message.time_in_queue counts
		}
		if handled.Add(1) == int64(calls) {
			close(allHandled)
		}
		return nil // the process span covers this call
	}, &azdispatch.ListenerOptions{
		Middleware: []azdispatch.Middleware{inst},
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 100*time.Millisecond),
		},
	})
	if err != nil {
		return err
	}
	state, err := inst.ObserveListener(queue.Name(), listener)
	if err != nil {
		return err
	}
	defer func() { _ = state.Unregister() }()
	if err := runUntil(ctx, listener, allHandled); err != nil {
		return err
	}

	traces := newTraces(spans.GetSpans())
	metrics, err := collect(ctx, reader)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(summarize(traces, metrics, queueMessages, calls, int(firstDeliveries.Load())))
	}
	fmt.Fprintf(out, "sent %d messages to %q (%d small, 1 claim-checked, 1 batch of %d); %d handler calls\n\n",
		queueMessages, queue.Name(), small, batchItems, calls)
	fmt.Fprintln(out, "Each message: its send, then the spans of its handling (the receive, shared by the")
	fmt.Fprintln(out, "messages it brought; process; settle) in traces of their own, joined to the send by")
	fmt.Fprintln(out, "span links, as the OpenTelemetry messaging conventions have it: the trace IDs differ,")
	fmt.Fprintln(out, "the links tie them together.")
	fmt.Fprintln(out)
	traces.print(out)
	fmt.Fprintln(out)
	metrics.print(out)
	fmt.Fprintln(out)
	fmt.Fprintln(out, "azdispatch.message.time_in_queue counts first deliveries by the service's clock, in whole")
	fmt.Fprintln(out, "seconds; azdispatch.queue.oldest_age was read once, before the listener ran.")
	return nil
}

// runUntil runs l until done is closed (or a minute passes), then stops it.
// Run settles what its handlers finished (deletes, and the spans of them)
// before it returns.
func runUntil[T any](ctx context.Context, l *azdispatch.Listener[T], done <-chan struct{}) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	result := make(chan error, 1)
	go func() { result <- l.Run(ctx) }() // waited for below
	select {
	case <-done:
	case <-time.After(time.Minute):
		stop()
		<-result
		return fmt.Errorf("messages not all handled within a minute: %+v", l.State())
	}
	stop()
	return <-result
}

// connectionString is the storage account's connection string: the one
// AZURE_STORAGE_CONNECTION_STRING names, or, without it, a private Azurite
// (the Azure Storage emulator, which needs Node.js) started for the run,
// which stop ends.
func connectionString(ctx context.Context) (cs, where string, stop func(), err error) {
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		return cs, "the account in AZURE_STORAGE_CONNECTION_STRING", func() {}, nil
	}
	emulator, err := azuritetest.New(ctx, nil)
	if err != nil {
		return "", "", nil, err
	}
	return emulator.ConnectionString(0), "a private Azurite", func() { _ = emulator.Close() }, nil
}
