package azdispatch

import (
	"time"

	"go.uber.org/goleak"
)

// leakPatience is how long goroutinesLeft waits for goroutines to end. Once
// the emulators are stopped, the connections every test account kept idle
// to them are closed by the other side, and their reading and writing
// goroutines end as soon as they are scheduled: on a loaded machine under
// the race detector that can take longer than goleak's own half second.
const leakPatience = 10 * time.Second

// goroutinesLeft reports the goroutines still running once the tests are
// over and the emulators stopped: every Listener.Run, renewal, watch and
// worker a test started must have ended, and so must the connections to the
// emulators. external says the tests ran against an account that outlives
// them (AZDISPATCH_CONNECTION_STRING): the HTTP connections kept idle to it
// are then left to their idle timeout, and only they are ignored. The
// transports that hold them belong to the accounts the tests opened, which
// are gone; there is nothing left to close them with.
func goroutinesLeft(external bool) error {
	var opts []goleak.Option
	if external {
		opts = append(opts,
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		)
	}
	deadline := time.Now().Add(leakPatience)
	for {
		err := goleak.Find(opts...) // itself retries for about half a second
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
