// Package sourcetest checks that an [azdispatch.Source] and
// [azdispatch.Target] keeps the contract a [azdispatch.Listener] and a
// [azdispatch.Publisher] rely on, and a Listener's outcomes over it. It
// follows the drivertest packages of the Go Cloud Development Kit: a
// backend supplies a [Harness], and [Run] and [RunListener] check it.
// azdispatch runs the same suite against Azurite through an
// [azdispatch.Queue], against the real service through the same, and
// against memqueue, alone or as the shards of an
// [azdispatch.ShardedQueue]: that is what lets memqueue stand in for
// storage elsewhere, its semantics checked, not assumed.
//
// A Source of your own (a wrapper that traces or injects faults, a queue on
// another store) is checked the same way: write a Harness whose NewQueue
// returns a new queue of yours, and call Run from a test. Run's subtest
// Capabilities also tells which optional methods your queue offers (see
// [azdispatch.Capabilities]), and checks those it does.
//
// # Differences the suite tolerates
//
// A backend may differ from the real service only where this table says so.
// Each difference the suite must branch on is a field of Behaviour, whose
// values Service, Azurite and Memqueue set, and nowhere else; the others it
// tolerates by never relying on them.
//
//	Difference                  Service              Azurite 3.37          memqueue           The suite
//	--------------------------  -------------------  --------------------  -----------------  ----------------------------
//	stale pop receipt, message  404 MessageNotFound  400                   404, as the        Behaviour.StaleReceipt; the
//	  still there                                      PopReceiptMismatch    service            error is ErrOwnershipLost
//	order within a batch        none promised        FIFO                  FIFO               matches messages by ID
//	approximate message count   may lag              exact                 exact              Behaviour.ExactDepth, else
//	                                                                                            waits for the count
//	expired messages counted    until collected      until the next        until a receive    reads no count after an
//	                                                   receive or delete     passes them        expiry
//	text over 64 KiB            400 MessageTooLarge  413                   refused before     azdispatch refuses it first:
//	                                                   RequestBodyTooLarge   storing            *MessageTooLargeError
//	64 KiB of multibyte text    accepted             refused now and then  accepted           tests the limit in ASCII
//	clock                       its own              this machine's        a Clock (Manual-   Behaviour.ClockSkew bounds
//	                                                                         Clock in tests)    absolute times; Advance
//	throttling, 503 ServerBusy  past its targets     never                 FailNext, Inter-   not here: memqueue's own
//	                                                                         cept               tests
//	one receive sees            all, not promised    all visible           all visible        Behaviour.Sweep receives
//
// What all of them do alike, and the suite checks: a receive takes 1 to 32
// messages; a receipt stays good until the message is received or updated
// again, even past its visibility timeout; a deleted message's receipt gets
// 404 MessageNotFound (Behaviour.GoneReceipt); times are reported to the
// whole second, a TTL of -1 as the end of the year 9999; a delay not
// shorter than the TTL gets 400 InvalidQueryParameterValue; text XML cannot
// carry is refused before it is sent (ErrInvalidText).
//
// A Source of your own that stores messages itself, rather than wrapping one
// of azdispatch's, does what azdispatch's own do before any request: its
// Send refuses text over 64 KiB with an [*azdispatch.MessageTooLargeError],
// and text XML cannot carry with an error matching [azdispatch.ErrInvalidText];
// it answers a stale or gone receipt with an [*azdispatch.StorageError] whose
// Op, StatusCode and Code are the service's, which matches
// [azdispatch.ErrOwnershipLost].
//
// A ShardedQueue over memqueues is one more backend: a receive may read one
// shard only, and passes over shards found empty a moment ago, so its
// Behaviour.Sweep is twice its shard count, and the suite never assumes that
// one receive returns everything there is.
//
// # Time
//
// Visibility timeouts, delays and TTLs are 1 s and Harness.Advance moves
// time by 2 s: on memqueue a ManualClock moves at once, on Azurite the suite
// sleeps. Every subtest has a queue of its own, so all run concurrently;
// the ones that sleep all at once, whatever -parallel allows, so that an
// Azurite run waits about 2 s in all.
// Waits for a Listener's outcomes poll with generous timeouts; nothing
// asserts how long something took.
package sourcetest
