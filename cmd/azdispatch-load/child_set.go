package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// soakProc is a soak scenario's own process type, a child with what the
// scenario knows of it, as the code that starts, stops and kills the
// processes of either scenario needs it.
type soakProc interface {
	base() *child
	slotName() string  // the slot it runs in, whichever incarnation: "worker 2"
	procName() string  // this incarnation: "worker 2 (process 3 of it)"
	hasReported() bool // a first report has come on its stdout
}

// base is promoted to each scenario's process type, which embeds child.
func (c *child) base() *child { return c }

// awaitReports waits until each of procs has reported once: until then a
// process may not be doing its part yet, so a fault would not test it. One
// that ends first, or is silent for 30 s, fails the run at its start.
func awaitReports[P soakProc](ctx context.Context, procs []P) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range procs {
		for !p.hasReported() {
			c := p.base()
			if c.exited() {
				return fmt.Errorf("%s exited at start: %s", p.slotName(), c.stderrTail())
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not report within 30 s: %s", p.slotName(), c.stderrTail())
			}
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// stopChildren asks each of running to stop, kills one that has not within
// the wait, and checks that each process started that was not killed
// ended well: a process that fails, even one not in the verdict's way, is
// a failure of the library or of the scenario, which the run is to show.
func stopChildren[P soakProc](running, started []P, within time.Duration) error {
	for _, p := range running {
		p.base().command("stop")
		p.base().closeStdin()
	}
	var errs []error
	for _, p := range running {
		select {
		case <-p.base().done:
		case <-time.After(within):
			p.base().kill()
			errs = append(errs, fmt.Errorf("%s did not stop within %.0f s", p.slotName(), within.Seconds()))
		}
	}
	for _, p := range started {
		c := p.base()
		if !c.wasKilled() && !c.cmd.ProcessState.Success() {
			errs = append(errs, fmt.Errorf("%s ended with %v: %s", p.procName(), c.cmd.ProcessState, c.stderrTail()))
		}
	}
	return errors.Join(errs...)
}

// killRunning kills whatever of procs still runs, stopped ones too: the
// clean-up of a run cut short, which leaves no process behind.
func killRunning[P soakProc](procs []P) {
	for _, p := range procs {
		if !p.base().exited() {
			p.base().kill()
		}
	}
}
