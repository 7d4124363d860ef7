// Package endpoint holds what a worker process serves over HTTP for the
// listeners of package [azdispatch]:
//
//   - [Health]: Kubernetes readiness and liveness probes for every
//     [azdispatch.Listener] of the process (and checks of its own);
//   - [DepthHandler]: a queue's approximate depth, or the sum over every
//     shard of an [azdispatch.ShardedQueue] in every account, the age of
//     its oldest message, and optionally the workers a latency target
//     calls for ([DepthOptions.TargetWait]), as JSON for KEDA's
//     metrics-api scaler;
//   - [WakeHandler] and [Notifier]: wake-ups from publishers in other
//     processes, so that an idle listener receives new work at once instead
//     of at its next poll;
//   - [StatusHandler]: what became of a group of messages or a tracked
//     message, 202 while it runs and 200 (or 303 to its result) once it
//     ended, in the manner of the Asynchronous Request-Reply pattern.
//
// Each is a plain [http.Handler] (or a client of one) for the mux the
// process already serves; none authenticates its callers, so mount them
// where only the cluster reaches them. What they show carries no URL query,
// account key or SAS token. The root package does not depend on this one:
// a worker that serves no HTTP does not link it.
//
//	health := endpoint.NewHealth(nil)
//	health.Add("orders", listener)
//	depth, err := endpoint.NewDepthHandler(queue, nil)
//	mux.Handle("GET /readyz", health.Readiness())
//	mux.Handle("GET /livez", health.Liveness())
//	mux.Handle("GET /metrics/depth", depth)
//	err = health.Run(ctx, "orders", listener.Run)
package endpoint
