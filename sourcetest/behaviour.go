package sourcetest

import (
	"net/http"
	"strings"
	"time"
)

// Answer is a storage error as the service states it: an HTTP status and
// the service's error code.
type Answer struct {
	Status int    // the HTTP status, e.g. 404
	Code   string // the service's error code, e.g. "MessageNotFound"
}

// Behaviour is where a backend may differ from the real service: every
// difference the suite branches on, in one place (the package documentation
// lists them all, with those the suite tolerates without a field). Service,
// Azurite and Memqueue return the known backends' values.
type Behaviour struct {
	// Name names the backend in failure messages.
	Name string

	// StaleReceipt is the answer to a Delete or SetVisibility with a pop
	// receipt that a later receive or update has replaced, while the
	// message is still there. Whatever it is, the error must match
	// azdispatch.ErrOwnershipLost.
	StaleReceipt Answer

	// GoneReceipt is the answer to a Delete or SetVisibility of a message
	// already deleted.
	GoneReceipt Answer

	// ExactDepth says Depth is exact as soon as a call returns. The
	// service's count is approximate and may lag; without ExactDepth the
	// suite waits for the count it expects instead of reading it once.
	ExactDepth bool

	// ClockSkew bounds how far the backend's timestamps may be from this
	// machine's clock, beyond the service's whole-second rounding.
	ClockSkew time.Duration

	// Sweep is how many receives in a row look at every visible message at
	// least once, and so how many the suite makes before it says a message
	// is not there: 1 for a queue; for a ShardedQueue, which passes over
	// shards found empty a moment ago and then asks one shard per receive,
	// twice its number of shards. Zero means 1.
	Sweep int
}

// Service is the real Azure Queue Storage service, as its documentation
// states it.
func Service() Behaviour {
	return Behaviour{
		Name:         "Azure Queue Storage",
		StaleReceipt: Answer{http.StatusNotFound, "MessageNotFound"},
		GoneReceipt:  Answer{http.StatusNotFound, "MessageNotFound"},
		ExactDepth:   false,
		ClockSkew:    5 * time.Minute, // the service's clock is not this machine's
		Sweep:        1,
	}
}

// Azurite is the emulator, as measured (version 3.37.0): a stale pop receipt
// gets 400 PopReceiptMismatch, and the count is exact.
func Azurite() Behaviour {
	b := Service()
	b.Name = "Azurite"
	b.StaleReceipt = Answer{http.StatusBadRequest, "PopReceiptMismatch"}
	b.ExactDepth = true
	b.ClockSkew = 2 * time.Second // the same machine's clock
	return b
}

// Memqueue is the in-memory queue of package memqueue, which follows the
// service, with an exact count and the clock of the test.
func Memqueue() Behaviour {
	b := Service()
	b.Name = "memqueue"
	b.ExactDepth = true
	b.ClockSkew = 2 * time.Second // a ManualClock started at time.Now
	return b
}

// ForConnectionString is the Behaviour of the account a connection string
// names: Azurite for the emulator's well-known development account, the
// service otherwise (AZDISPATCH_CONNECTION_STRING may point the tests at a
// real account).
func ForConnectionString(cs string) Behaviour {
	if strings.Contains(cs, "devstoreaccount1") || strings.Contains(cs, "UseDevelopmentStorage=true") {
		return Azurite()
	}
	return Service()
}

// sweep is b.Sweep with its default.
func (b Behaviour) sweep() int { return max(b.Sweep, 1) }
