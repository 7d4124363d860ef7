package otelazdispatch_test

import (
	"context"
	"fmt"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/otelazdispatch"
)

// One Instrumentation traces the publisher and the listener; with
// Propagate, the handler's process span is linked to the send that made
// its message, across the queue.
func ExampleNew() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	inst, err := otelazdispatch.New(&otelazdispatch.Options{TracerProvider: tp, Propagate: true})
	if err != nil {
		panic(err)
	}

	queue := memqueue.New("orders", nil)
	publisher, err := azdispatch.NewPublisher[order](queue, &azdispatch.PublisherOptions{
		Middleware: []azdispatch.SendMiddleware{inst},
	})
	if err != nil {
		panic(err)
	}
	if _, err := publisher.Send(context.Background(), order{ID: 1}); err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	listener, err := azdispatch.NewListener(queue, func(context.Context, *azdispatch.Message[order]) error {
		stop() // one message is enough here; Run still settles it
		return nil
	}, &azdispatch.ListenerOptions{Middleware: []azdispatch.Middleware{inst}})
	if err != nil {
		panic(err)
	}
	if err := listener.Run(ctx); err != nil {
		panic(err)
	}

	var send, process tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch {
		case strings.HasPrefix(s.Name, "send"):
			send = s
		case strings.HasPrefix(s.Name, "process"):
			process = s
		}
		if !strings.HasPrefix(s.Name, "receive") {
			fmt.Println(s.Name, s.SpanKind)
		}
	}
	fmt.Println("process linked to send:", process.Links[0].SpanContext.SpanID() == send.SpanContext.SpanID())
	// Output:
	// send orders producer
	// process orders consumer
	// delete orders client
	// process linked to send: true
}
