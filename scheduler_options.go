package azdispatch

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"
)

// SchedulerOptions configures a [Scheduler]. Nil, or a zero field, means
// the default.
type SchedulerOptions struct {
	// Instance names this scheduler in the schedules' state: who sent an
	// occurrence, who is sending one. Defaults to the host name, the
	// process ID and a random suffix.
	Instance string
	// ClaimTimeout is how long an instance's claim on an occurrence holds:
	// an instance that has not sent it by then (it died, or paused) is
	// taken over by another, so an occurrence is sent at most about this
	// late after a crash. It must exceed the time one wake's sends take,
	// and bounds each wake's requests: a store that hangs fails a wake
	// then. Defaults to 15 s; at least 2 s.
	ClaimTimeout time.Duration
	// Grace is how late an occurrence may be sent and still count as on
	// time (after its [Schedule.Jitter]); one later was missed, and the
	// schedule's [Misfire] policy says what becomes of it. Defaults to,
	// and is at least, twice ClaimTimeout, so that a taken-over occurrence
	// is on time.
	Grace time.Duration
	// Watch is how often each instance reads a schedule's state while it
	// waits for an occurrence further off, so as to see a pause, a resume
	// or a run-now asked for in another process (the command-line tool,
	// the dashboard, [PayloadStore.PauseSchedule]): one read per schedule
	// and instance per Watch, and none for a schedule whose occurrences
	// come sooner. This scheduler's own [Scheduler.Pause], [Scheduler.Resume]
	// and [Scheduler.RunNow] are seen at once. Defaults to 30 s; negative
	// means never: the others are then seen at the next occurrence, or at
	// the end of the pause.
	Watch time.Duration
	// Logger receives the scheduler's events. Defaults to [slog.Default].
	Logger *slog.Logger
}

// withDefaults fills zero fields and checks the rest.
func (o SchedulerOptions) withDefaults() (SchedulerOptions, error) {
	if o.Instance == "" {
		host, _ := os.Hostname()
		o.Instance = fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), rand.N(1<<16))
	}
	if o.ClaimTimeout == 0 {
		o.ClaimTimeout = 15 * time.Second
	}
	if o.ClaimTimeout < 2*time.Second {
		return o, &ConfigError{Field: "SchedulerOptions.ClaimTimeout", Reason: fmt.Sprintf("%v: at least 2s", o.ClaimTimeout)}
	}
	if o.Grace == 0 {
		o.Grace = 2 * o.ClaimTimeout
	}
	if o.Grace < 2*o.ClaimTimeout {
		return o, &ConfigError{Field: "SchedulerOptions.Grace", Reason: fmt.Sprintf("%v: at least twice ClaimTimeout (%v)", o.Grace, o.ClaimTimeout)}
	}
	if o.Watch == 0 {
		o.Watch = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}
