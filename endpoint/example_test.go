package endpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/endpoint"
	"github.com/azdispatch/azdispatch/memqueue"
)

// Order is the example's message.
type Order struct{ ID string }

// A worker's probes and its scaling metric on one mux: /readyz and /livez
// for Kubernetes, /metrics/depth for KEDA's metrics-api scaler. In a real
// process the mux is served with http.ListenAndServe(":8080", mux); here
// requests go straight to it.
func ExampleHealth() {
	queue := memqueue.New("orders", nil) // or account.Queue("orders"), or a ShardedQueue
	for range 3 {
		_, _ = queue.Send(context.Background(), `{"ID":"o-1"}`, nil)
	}
	handled := make(chan struct{}, 3)
	listener, err := azdispatch.NewListener(queue, func(context.Context, *azdispatch.Message[Order]) error {
		handled <- struct{}{}
		return nil
	}, nil)
	if err != nil {
		panic(err)
	}
	depth, err := endpoint.NewDepthHandler(queue, nil)
	if err != nil {
		panic(err)
	}
	health := endpoint.NewHealth(nil)
	health.Add("orders", listener)

	mux := http.NewServeMux()
	mux.Handle("GET /readyz", health.Readiness())
	mux.Handle("GET /livez", health.Liveness())
	mux.Handle("GET /metrics/depth", depth)
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}

	code, body := get("/metrics/depth")
	fmt.Println("depth:", code, body["depth"])
	code, body = get("/readyz")
	fmt.Println("before Run:", code, body["status"])

	// Run through the Health, so that a listener that gives up (with
	// ListenerOptions.FatalTimeout) fails /livez and the pod is restarted.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- health.Run(ctx, "orders", listener.Run) }()
	select {
	case <-handled: // the listener runs, and storage answers it
	case <-time.After(time.Minute):
		panic("no message handled within a minute")
	}
	code, body = get("/readyz")
	fmt.Println("running:", code, body["status"])
	code, body = get("/livez")
	fmt.Println("live:", code, body["status"])

	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// depth: 200 3
	// before Run: 503 not ready
	// running: 200 ready
	// live: 200 live
	// run: <nil>
}
