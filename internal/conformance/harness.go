// Package conformance holds the harnesses that run the public Source
// conformance suite, package sourcetest, against this module's own
// backends: a storage account (Azurite, or a real one) through
// azdispatch.Queue, and memqueue, alone or as the shards of an
// azdispatch.ShardedQueue.
package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// AccountHarness tests queues of a storage account through azdispatch.Queue:
// Azurite, or a real account. Its time is real: Advance sleeps.
type AccountHarness struct {
	// Account is where the queues are made, each with a fresh name.
	Account *azdispatch.Account
	// Behave is the account's Behaviour: sourcetest.Azurite() or
	// sourcetest.Service() (see sourcetest.ForConnectionString).
	Behave sourcetest.Behaviour
}

var _ sourcetest.Harness = (*AccountHarness)(nil)

// NewQueue opens a queue with a fresh random name. Nothing is created until
// the first send or receive: an azdispatch.Queue creates itself then.
func (h *AccountHarness) NewQueue(t *testing.T) azdispatch.Shard {
	t.Helper()
	q, err := h.Account.Queue(UniqueName(t))
	require.NoError(t, err)
	return q
}

// Advance sleeps for d: the emulator's and the service's time is real.
func (h *AccountHarness) Advance(_ *testing.T, _ azdispatch.Shard, d time.Duration) { time.Sleep(d) }

// Behaviour returns h.Behave.
func (h *AccountHarness) Behaviour() sourcetest.Behaviour { return h.Behave }

// UniqueName returns a fresh valid queue name ("conf" and 16 hex digits),
// short enough that "-poison" and a shard suffix still fit: tests that run
// in parallel, or runs that share an account, never meet.
func UniqueName(t testing.TB) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "conf" + hex.EncodeToString(b)
}
