package sourcetest

import (
	"sync"
	"testing"
)

// suiteTest is one semantic the suite checks, on a queue of its own.
type suiteTest struct {
	name string
	run  func(t *testing.T, h Harness)
	// waits says the test calls Harness.Advance, which sleeps on real time.
	waits bool
}

// sourceTests are the semantics Run checks, one subtest each.
var sourceTests = []suiteTest{
	// Sending and receiving (source_send.go).
	{"RoundTripKeepsIDAndTextExactly", testRoundTrip, false},
	{"ReceiveRefusesMaxOutside1To32", testReceiveArguments, false},
	{"ReceiveReturnsAtMostMaxAndEachMessageOnceWhileHidden", testReceiveEachOnce, false},
	{"Text64KiBIsAcceptedAndOneByteMoreRefused", testSizeLimit, false},
	{"TextXMLCannotCarryIsRefused", testInvalidText, false},
	// Receipts and visibility (source_visibility.go).
	{"ReceivedMessageReappearsAfterVisibilityWithNewReceipt", testReappears, true},
	{"SetVisibilityZeroReleasesAtOnceAndStalesTheReceipt", testRelease, false},
	{"SetVisibilityHidesAndKeepsText", testHide, true},
	{"ReceiptOutlivesVisibilityUntilReceivedAgain", testReceiptOutlivesVisibility, true},
	{"DeleteTwiceLosesOwnership", testDeleteTwice, false},
	{"DeliveryFromAnotherQueueIsRefused", testForeignDelivery, false},
	// Time and counts (source_time.go).
	{"SendDelayHidesUntilDue", testDelay, true},
	{"SendDelayNotShorterThanTTLIsRefused", testDelayPastTTL, false},
	{"MessagePastItsTTLIsNotReceived", testExpiry, true},
	{"TTLSetsExpiresAtAndNegativeNeverExpires", testExpiresAt, false},
	{"DepthCountsInvisibleMessages", testDepth, false},
	// What it offers beyond the interfaces (azdispatch.Capabilities).
	{"Capabilities", testCapabilities, false},
}

// Run checks h's queues against the [azdispatch.Source] and
// [azdispatch.Target] contract, every semantic a subtest on a queue of its
// own, all of them concurrent. Its subtest Capabilities logs which optional
// methods the queues offer (see [azdispatch.Capabilities] and [Offered]), and
// checks each one they do; one they do not is a skipped subtest.
func Run(t *testing.T, h Harness) { runAll(t, h, sourceTests) }

// runAll runs tests as subtests of t, concurrently. Those that wait on
// Harness.Advance run at once, all together, each in a goroutine of its own
// (t.Run allows that), and runAll waits for them: on real time they sleep,
// and as parallel subtests they would queue behind -parallel, which is the
// number of CPUs by default, one sleep after another. The others are
// parallel subtests, which start when t's function returns.
func runAll(t *testing.T, h Harness, tests []suiteTest) {
	var waiting sync.WaitGroup
	for _, st := range tests {
		if st.waits {
			waiting.Go(func() { t.Run(st.name, func(t *testing.T) { st.run(t, h) }) })
			continue
		}
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.run(t, h)
		})
	}
	waiting.Wait()
}
