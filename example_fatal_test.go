package azdispatch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
)

// A fatal storage error (here a revoked key: every receive answers 403)
// shows in Ready, which a daemon serves as its readiness probe, and in
// State; with FatalTimeout, Run returns it.
func ExampleListener_Ready() {
	queue := memqueue.New("orders", nil)
	queue.FailNext(azdispatch.OpReceive, 100, &azdispatch.StorageError{
		Op: "receive", Queue: "orders", StatusCode: http.StatusForbidden, Code: "AuthenticationFailed",
	})
	fatal := make(chan struct{}, 1)
	listener, err := azdispatch.NewListener(queue, func(context.Context, *azdispatch.Message[Order]) error { return nil },
		&azdispatch.ListenerOptions{
			FatalTimeout: 200 * time.Millisecond,
			OnEvent: func(e azdispatch.Event) {
				if e.Kind == azdispatch.EventFatal {
					select {
					case fatal <- struct{}{}:
					default: // reported already
					}
				}
			},
		})
	if err != nil {
		panic(err)
	}
	// What a daemon's readiness endpoint serves: 503 while not ready.
	probes := http.NewServeMux()
	probes.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if err := listener.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	_ = probes // served with http.ListenAndServe(":8080", probes)

	done := make(chan error)
	go func() { done <- listener.Run(context.Background()) }()
	select {
	case <-fatal:
	case <-time.After(time.Minute):
		panic("no fatal error within a minute")
	}
	fmt.Println("ready:", errors.Is(listener.Ready(), azdispatch.ErrNotReady))
	fmt.Println("state:", listener.State().Fatal)
	err = <-done
	fmt.Println("run returned a fatal error:", errors.Is(err, azdispatch.ErrFatal))
	// Output:
	// ready: true
	// state: azdispatch: receive on queue "orders": 403 AuthenticationFailed (the credential was refused: a wrong key, an expired or altered SAS, or this machine's clock is more than 15 minutes off the service's)
	// run returned a fatal error: true
}
