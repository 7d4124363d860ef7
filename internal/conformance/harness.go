package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// Queue is what the suite tests: a Source and Target with a poison queue of
// its own beside it, which a Listener on it uses by default.
type Queue interface {
	azdispatch.Shard
	azdispatch.PoisonQueuer
}

// Harness is what a backend supplies to be tested.
type Harness interface {
	// NewQueue returns a new, empty queue for t's use alone, so that
	// subtests can run in parallel.
	NewQueue(t *testing.T) Queue

	// Advance moves q's time forward by d, so that messages whose
	// visibility timeout, delay or TTL ends within d are due. A backend on
	// real time sleeps; one on a manual clock moves it.
	Advance(t *testing.T, q Queue, d time.Duration)

	// Behaviour describes where the backend differs from the service.
	Behaviour() Behaviour
}

// AccountHarness tests queues of a storage account through azdispatch.Queue:
// Azurite, or a real account. Its time is real: Advance sleeps.
type AccountHarness struct {
	// Account is where the queues are made, each with a fresh name.
	Account *azdispatch.Account
	// Behave is the account's Behaviour: Azurite() or Service() (see
	// ForConnectionString).
	Behave Behaviour
}

var _ Harness = (*AccountHarness)(nil)

// NewQueue opens a queue with a fresh random name. Nothing is created until
// the first send or receive: an azdispatch.Queue creates itself then.
func (h *AccountHarness) NewQueue(t *testing.T) Queue {
	t.Helper()
	q, err := h.Account.Queue(UniqueName(t))
	require.NoError(t, err)
	return q
}

// Advance sleeps for d: the emulator's and the service's time is real.
func (h *AccountHarness) Advance(_ *testing.T, _ Queue, d time.Duration) { time.Sleep(d) }

// Behaviour returns h.Behave.
func (h *AccountHarness) Behaviour() Behaviour { return h.Behave }

// UniqueName returns a fresh valid queue name ("conf" and 16 hex digits),
// short enough that "-poison" and a shard suffix still fit: tests that run
// in parallel, or runs that share an account, never meet.
func UniqueName(t testing.TB) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "conf" + hex.EncodeToString(b)
}
