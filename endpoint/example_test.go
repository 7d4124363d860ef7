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

// The depth endpoint with a latency target: the age of the oldest message
// beside the depth, and the workers it takes to clear the depth within
// TargetWait when each handles WorkerRate messages a second. KEDA's
// metrics-api scaler reads "desired_workers" with targetValue "1" as the
// replica count. The queue here runs on a manual clock, so that the wait
// is exact.
func ExampleDepthHandler() {
	clock := memqueue.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	queue := memqueue.New("orders", &memqueue.Options{Clock: clock})
	for range 30 {
		_, _ = queue.Send(context.Background(), `{"ID":"o-1"}`, nil)
	}
	depth, err := endpoint.NewDepthHandler(queue, &endpoint.DepthOptions{
		CacheFor:   -1,               // read at every request, for the example
		TargetWait: 20 * time.Second, // time in queue aimed for
		WorkerRate: 0.5,              // messages a second one replica handles
	})
	if err != nil {
		panic(err)
	}
	get := func() map[string]any {
		rec := httptest.NewRecorder()
		depth.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/depth", nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return body
	}

	// 30 messages, 0.5 a second per worker, within 20 s: ceil(30 / 10).
	body := get()
	fmt.Println("fresh:", body["depth"], body["oldest_age_s"], body["desired_workers"])

	// The oldest has waited 40 s, twice the target: the backlog is late,
	// and the answer is doubled (at most).
	clock.Advance(40 * time.Second)
	body = get()
	fmt.Println("late:", body["depth"], body["oldest_age_s"], body["desired_workers"])
	// Output:
	// fresh: 30 0 3
	// late: 30 40 6
}
