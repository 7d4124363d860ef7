// Package memqueue is an in-memory queue with the semantics of an Azure
// storage queue, for testing handlers and listeners without Node, an
// emulator or an account.
//
//	queue := memqueue.New("orders", nil) // in place of account.Queue("orders")
//	_, err := queue.Send(ctx, `{"id":1}`, nil)
//	queue.FailNext(azdispatch.OpDelete, 1, nil) // the next delete fails: 503 ServerBusy
//	listener, err := azdispatch.NewListener(queue, handle, nil)
//	err = listener.Run(ctx)
//
// A *[Queue] is an [azdispatch.Shard] (a Source and a Target), so a Listener, a
// Publisher or a ShardedQueue over several of them works unchanged. It
// behaves as the service does, not as a channel would:
//
//   - A receive returns 1 to 32 visible messages and hides them for the
//     visibility timeout; one not deleted by then reappears.
//   - Every receive raises a message's DequeueCount and gives it a new pop
//     receipt; so does every [Queue.SetVisibility]. A stale receipt is
//     refused with a 404 MessageNotFound *[azdispatch.StorageError], which
//     matches [azdispatch.ErrOwnershipLost].
//   - Messages expire after their TTL (7 days by default, never if negative)
//     and may be sent with a delay shorter than the TTL. Durations are whole
//     seconds, rounded up; reported times are UTC to the whole second.
//   - Text is limited to 64 KiB of UTF-8 and must be text XML can carry.
//   - Depth counts every message, invisible ones included.
//   - A receive takes visible messages oldest first, as the service
//     typically does; [Options.Shuffle] takes them in a random order
//     instead, for a test of code that must not rely on the order (the
//     service promises none).
//
// These rules are checked against Azurite by the conformance suite that
// runs against both (package sourcetest); where Azurite and the real service differ, this
// package follows the service.
//
// Each queue offers a payload store in memory on its clock
// ([Queue.PayloadStore]), with the blob service's conditional writes and
// times (checked against Azurite too), so that a Publisher's claim checks,
// batches, cancels ([azdispatch.Publisher.Cancel]: a queue is an
// [azdispatch.CancelTarget]), unique sends and delays beyond 7 days, and a
// Scheduler's schedules, run on it as on an account's queue. Queues that
// are to share one store, as an account's queues share a container, name
// it in [Options.Payloads].
//
// Time comes from a [Clock]: a [ManualClock] lets a test move a queue's
// time forward (visibility timeouts, retry delays, expiry) without
// sleeping. Everything a listener decides on the service's clock follows
// it: when a delayed or scheduled message is due (a message received a
// little before its due time is held until the manual clock reaches it,
// through the records of the queue's payload store), its time in queue, a scheduler's waits and
// claims. A listener's own timers run on the machine's clock, as they do
// against the service, and do not wait for a manual one: the idle back-off
// between receives ([azdispatch.ListenerOptions].Idle), renewals at half
// the visibility timeout, HandlerTimeout, DrainTimeout, the turns of a
// RateLimit, and a [azdispatch.ShardedQueue]'s EmptySkip and back-offs; a
// test sets them short rather than move the manual clock for them. Fault hooks make calls fail ([Queue.FailNext]), act but report
// failure as if the response had been lost ([Queue.LoseNext]), or pass
// through a function of your own ([Options.Intercept]), so that a test can
// watch its handler redelivered.
package memqueue
