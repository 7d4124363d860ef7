// Package azdispatch dispatches work through Azure Storage queues: a typed
// Publisher puts messages on a queue, and a Listener receives them in
// batches, runs a handler for each, deletes what succeeded and retries what
// failed, moving what keeps failing to a poison queue.
//
// # Delivery guarantee
//
// Delivery is at least once. A received message is hidden, not removed; the
// listener deletes it only after its handler returns nil. If the process dies
// first, or a delete fails, the message reappears when its visibility
// timeout ends and is handled again, with a higher DequeueCount. Handlers
// should therefore be idempotent. Nothing is deleted that was not handled,
// and nothing is moved to the poison queue without its text.
//
// # Life of a message
//
//	Publisher ── encode ──▶ Queue ──▶ Listener: receive up to 32, hidden for VisibilityTimeout
//	   ├─ dequeued more than MaxDequeueCount times ──▶ poison queue, then delete
//	   ├─ cannot be decoded ─────────────────────────▶ poison queue, then delete
//	   └─ handler (visibility renewed at half-life while it runs)
//	        ├─ nil ─────────────────▶ delete
//	        ├─ Permanent(err) ──────▶ poison queue, then delete
//	        ├─ error or panic ──────▶ hidden for the Retry delay (poisoned after the last try)
//	        └─ ownership lost ──────▶ nothing: another receiver has it
//
// A poisoned message is kept in a PoisonEnvelope (original text, ID, dequeue
// count, reason, times) in "<queue>-poison"; Requeue moves it back.
//
// # Failures
//
// Storage errors never stop a listener: a failed receive is retried after a
// back-off, a failed delete or release leaves the message to reappear, a
// stale pop receipt (ErrOwnershipLost) means another receiver owns the
// message now. Every outcome is counted in State. Errors from storage are
// *StorageError values, which keep the SDK's *azcore.ResponseError
// reachable with errors.As and never print a key or SAS signature.
//
// # Cost
//
// Every request to the storage service is a billable transaction, empty
// receives and retries included. A Queue counts its requests by kind
// (Transactions), and so do an Account and a Listener; CountTransactions
// counts the requests made under one context. A busy listener makes about
// 1.03 requests per message (a receive per 32 messages and a delete each);
// an idle one backs off exponentially (the Idle hook) to one receive every
// 24 to 30 s.
//
// # Scaling and wake-ups
//
// A listener runs between MinDequeuers (1) and MaxDequeuers (8) receive
// loops, each with up to Concurrency handlers. When a dequeuer receives a
// full batch, the listener reads the queue's depth, at most once per
// ScaleInterval, and starts the dequeuers the Scale hook asks for; a
// dequeuer whose idle back-off has reached its cap stops, down to the floor,
// but not within ScaleInterval of a scale-up. Notify ends the back-off at
// once. A send through the listener's own *Queue (or ShardedQueue) in the
// same process calls it; for publishers elsewhere, mount a WakeHandler and
// have them call an HTTPNotifier from PublisherConfig.OnSent. With PushOnly
// and a Wake source, an idle listener makes no request at all.
//
// Past one queue's target (about 2,000 messages/s) or one account's (about
// 20,000 requests/s), a ShardedQueue spreads one logical queue over many
// queues in many accounts, and a RequestLimiter, given as
// AccountOptions.Limiter, paces this process's requests to its share of the
// account's target, so that it does not find the target through 503
// ServerBusy.
//
// # Shutdown
//
// Listener.Run returns when its context ends and everything it started has
// stopped: it stops receiving, makes visible at once what it received but
// did not start, lets running handlers finish for DrainTimeout, then cancels
// their contexts and waits for them.
package azdispatch
