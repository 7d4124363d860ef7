package sourcetest

import (
	"testing"
	"time"

	"github.com/azdispatch/azdispatch"
)

// Harness is what a backend supplies to be checked: queues of its kind,
// a way to move their time, and where it differs from the service.
type Harness interface {
	// NewQueue returns a new, empty queue for t's use alone, so that
	// subtests can run in parallel. [RunListener] needs it to have a
	// poison queue beside it (a PoisonQueue method, see
	// [azdispatch.Capabilities]); [Run] does not.
	NewQueue(t *testing.T) azdispatch.Shard

	// Advance moves q's time forward by d, so that messages whose
	// visibility timeout, delay or TTL ends within d are due. A backend on
	// real time sleeps; one on a manual clock moves it.
	Advance(t *testing.T, q azdispatch.Shard, d time.Duration)

	// Behaviour describes where the backend differs from the service.
	Behaviour() Behaviour
}
