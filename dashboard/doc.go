// Package dashboard is an operator's web view of azdispatch queues: an
// [http.Handler] a service mounts under a prefix of its own, which the
// azdispatch command also serves on its own (azdispatch dashboard).
//
//	h, err := dashboard.New(&dashboard.Options{Sources: []azdispatch.Source{orders}})
//	if err != nil {
//		return err
//	}
//	defer h.Close()
//	h.Register("orders", listener) // a *azdispatch.Listener[T]: its live state
//	mux.Handle("/ops/azdispatch/", http.StripPrefix("/ops/azdispatch", requireOperator(h)))
//
// # Pages
//
// Every page is rendered on the server with [html/template], with a small
// script and stylesheet of its own from an embedded file system: no build
// step, and every page works without JavaScript (the script only refreshes
// the page in place, and pauses while the tab is hidden). The pages are one
// level deep and every URL in them is relative, so the handler works under
// any prefix with [http.StripPrefix]:
//
//   - overview (prefix/): each queue, sharded set, shard and account with its
//     depth, poison depth and the age of its oldest message
//     ([azdispatch.OldestAge]), whether it is paused, by whom and until
//     when ([azdispatch.Pauser]; nothing for a queue that cannot be),
//     its account's endpoint host ([azdispatch.Account.Host]), a shard's
//     health as its [azdispatch.ShardedQueue] sees it, and a sparkline of
//     each over the last hour;
//   - poison (prefix/poison): the envelopes at the front of each poison
//     queue, decoded, grouped and filtered by reason, source and age, bodies
//     hidden until revealed;
//   - payloads (prefix/payloads): what a [azdispatch.Sweep] would remove;
//   - schedules (prefix/schedules): [azdispatch.PayloadStore.Schedules],
//     with each schedule's pause and a run now waiting for a scheduler;
//   - latency (prefix/latency): time in queue of registered listeners and
//     the oldest age against [Options.TargetAge];
//   - listeners (prefix/listeners): the live [azdispatch.State] of each
//     listener registered with [Handler.Register];
//   - cost (prefix/cost): billable transactions by kind, all of this
//     process's on the dashboard's accounts and the dashboard's own as a
//     part of them, per hour and priced at [Options.PricePer10K] once at
//     least a minute has been counted (before that, the counts and how
//     long they cover).
//
// Data the dashboard cannot read shows as absent ("—" with the reason),
// never as zero.
//
// # Cost of leaving it open
//
// Reads go through cached readings shared by every viewer: one reading of
// the queues per [Options.CacheFor], however many people look. A reading
// belongs to no viewer: one who leaves stops waiting for it, but it goes on
// for the others (bounded by a timeout of its own, and ended by
// [Handler.Close]). A reading of
// the overview costs three requests per queue (its depth, which brings its
// pause with it, its poison queue's depth, and a peek of the front messages
// for the oldest age), and one more for the pause of a queue that can be
// paused but reads it apart from its depth (a shard of a sharded queue, a
// memqueue); the poison
// page one peek per poison queue; the payloads page one blob listing per
// 5,000 blobs. The dashboard counts its own requests and shows them on the
// cost page.
//
// # Actions and safety
//
// The dashboard is read-only unless [Options.Write] is set; a service with
// its own authorization narrows that per request with [Options.ReadOnly].
// In write mode it can requeue or purge one poison message, or every one
// matching a filter (a background job with progress, stopped by
// [Handler.Close]), send a test message (no default text: the listener's
// handler processes it like any other message, and an empty one is
// refused), run a sweep, pause a queue (for 15 minutes, 1, 4 or 24 hours,
// saying who and why in up to 256 bytes) or a whole sharded set and resume
// it, and pause, resume or run now a schedule
// ([azdispatch.PayloadStore.PauseSchedule]). Every destructive
// action goes through a confirmation page, and no GET changes anything.
//
// Every response carries a strict Content-Security-Policy (no inline script
// or style), X-Content-Type-Options, Referrer-Policy and Cache-Control
// headers; every non-GET request passes [http.CrossOriginProtection]; form
// bodies are bounded, and so is every value read from a request. Paths are
// matched exactly: no redirect but the bare prefix's, none that leaves the
// prefix, and only the embedded assets by name under prefix/static/. No page
// shows a connection string, an account key, a SAS or a URL. Where storage
// is shows only as each account's host on the overview and the cost page
// (so that two accounts of one name are told apart); an error says what
// failed (the request, its queue, the service's status and code, or
// "connection refused", "timed out", …), never a host, an address or a URL.
//
// The dashboard has no opinion on authentication: wrap the handler in your
// own (see the package's Example).
package dashboard
