package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// The schedule scenario is a soak of the Scheduler: three scheduler
// processes (this binary again, each running a Scheduler with the same two
// schedules, one every 2 s and one every 7 s) send to one queue of one
// Azurite, and one listener in this process handles what they send, while
// faults are made at random from a seed:
//
//   - SIGKILL of a scheduler process every few seconds, and its restart at
//     once, as a new instance;
//   - now and then, SIGSTOP of one for longer than its claim timeout, then
//     SIGCONT: it wakes believing it holds what it held.
//
// Some faults are aimed (half of those that come AimGap or more after the
// last aimed one): they wait for a process to report that it holds the
// claim of an occurrence, or that it has just sent one, and fall on that
// process then (the workers take a few milliseconds in Messages and after
// each send, as a slow process would, so that the fault can fall before
// the send, or between the send and the record's move on). The others
// fall on any process, at any time. A seed replays the draws, not the
// timing: which process an aimed fault finds depends on the run.
//
// The model, and why the verdict is sound. At most one process is paused
// at a time and a killed one is restarted at once, so with three there is
// always one running. An occurrence whose claimer dies or stops is taken
// over once the claim times out, so it is sent about ClaimTimeout late
// (plus up to a second: the schedulers read the storage service's clock
// from the Date header, which is whole seconds), within Grace. Aimed faults
// are spaced by more than Grace+ClaimTimeout, so that no occurrence is held
// up by two of them in a row (a random one landing on a claim by chance is
// rare). So every occurrence is to be handled once, and no later than
// Jitter+Grace after its time, plus a slack for the listener to receive
// it; an occurrence sent twice (its sender stopped after the send, and was
// taken over) is to be dropped by the listener as a duplicate, unhandled.
// Messages handled late, skipped as missed, or twice, are what the
// checker (schedule_check.go) counts.

// scheduleConfig shapes a schedule run.
type scheduleConfig struct {
	Duration   time.Duration // of the faults; the window of occurrences judged ends with it
	Warmup     time.Duration // the window starts this long after the faults do
	Schedulers int
	Schedules  []scheduleSpec

	ClaimTimeout time.Duration
	Grace        time.Duration
	// Slack is the late bound's allowance, past Jitter+Grace, for the
	// listener to receive and start a message (its back-off is short).
	Slack        time.Duration
	ListenerIdle time.Duration // the listener's longest back-off on an empty queue
	Slow         time.Duration // the workers' (see scheduleWorkerConfig.Slow)

	KillEvery  [2]time.Duration
	PauseEvery [2]time.Duration
	PauseFor   time.Duration
	Aim        float64       // the share of faults aimed at a claim or a send
	AimWait    time.Duration // the most an aimed fault waits for one, before falling at random
	AimGap     time.Duration // the least time between aimed faults
}

// scheduleDefaults is the soak's configuration.
func scheduleDefaults(d time.Duration) scheduleConfig {
	claim := 3 * time.Second
	return scheduleConfig{
		Duration: d, Warmup: min(10*time.Second, d/4), Schedulers: 3,
		Schedules: []scheduleSpec{
			{Name: "every-2s", Every: 2 * time.Second},
			{Name: "every-7s", Every: 7 * time.Second, Jitter: time.Second},
		},
		ClaimTimeout: claim, Grace: 2 * claim, Slack: 2 * time.Second,
		ListenerIdle: 200 * time.Millisecond, Slow: 20 * time.Millisecond,
		KillEvery:  [2]time.Duration{2 * time.Second, 6 * time.Second},
		PauseEvery: [2]time.Duration{15 * time.Second, 25 * time.Second},
		PauseFor:   claim + 2*time.Second,
		Aim:        0.5, AimWait: 8 * time.Second, AimGap: 2*claim + claim + time.Second, // Grace + ClaimTimeout + 1 s
	}
}

// scheduleQuick is a short run's configuration: pauses more often, so that
// a run of under a minute has a few.
func scheduleQuick(d time.Duration) scheduleConfig {
	c := scheduleDefaults(d)
	c.PauseEvery = [2]time.Duration{6 * time.Second, 10 * time.Second}
	return c
}

// lateBound is how late after its time an occurrence may be handled: the
// largest Jitter, plus Grace (the documented bound past which an
// occurrence counts as missed), plus the slack.
func (c *scheduleConfig) lateBound() time.Duration {
	var jitter time.Duration
	for _, s := range c.Schedules {
		jitter = max(jitter, s.Jitter)
	}
	return jitter + c.Grace + c.Slack
}

// scheduleRecord is the schedule scenario's -json record.
type scheduleRecord struct {
	Scenario   string   `json:"scenario"`
	Seed       int64    `json:"seed"`
	DurationS  float64  `json:"duration_s"`
	WindowS    float64  `json:"window_s"` // the occurrences judged are those whose time fell in this window
	Schedulers int      `json:"schedulers"`
	Schedules  []string `json:"schedules"`
	ClaimS     float64  `json:"claim_timeout_s"`
	GraceS     float64  `json:"grace_s"`

	Occurrences int `json:"occurrences"` // expected in the window
	Handled     int `json:"handled"`     // of them, handled
	Missing     int `json:"missing"`
	Duplicated  int `json:"duplicated"` // handled more than once
	Late        int `json:"late"`       // handled later than late_bound_s after their time
	Skipped     int `json:"skipped"`    // not handled, stood for by a catch-up (MisfireOne)
	Unexpected  int `json:"unexpected"` // handled, in the window, and not an occurrence
	LateFlagged int `json:"late_flagged"`
	Delayed     int `json:"delayed"` // handled more than ClaimTimeout/2 late: held up by a fault

	LateBoundS float64 `json:"late_bound_s"`
	MaxLateS   float64 `json:"max_late_s"`

	Kills       int `json:"kills"`
	KillsAimed  int `json:"kills_aimed"`
	Pauses      int `json:"pauses"`
	PausesAimed int `json:"pauses_aimed"`
	Processes   int `json:"processes"` // scheduler processes started in all

	DuplicatesDropped int64 `json:"duplicates_dropped"` // the listener's State.Duplicates
	StateSent         int64 `json:"state_sent"`         // the schedules' records: occurrences sent, whole run
	StateSkipped      int64 `json:"state_skipped"`      // and missed and not sent

	RequestsPerOccurrence float64 `json:"requests_per_occurrence"`
	SchedulerRequests     int64   `json:"scheduler_requests"` // in the window, every process's
	MarkRequests          int64   `json:"mark_requests"`      // in the window, the listener's blob requests

	OK bool `json:"ok"`
}

// errScheduleVerdict is returned when a run finds missing, duplicated,
// late or unexpected occurrences.
var errScheduleVerdict = errors.New("schedule: the check failed")

func runSchedule(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	if o.real {
		return nil, nil, errors.New("the schedule scenario needs a private Azurite: it measures lateness on this machine's clock, which must be the service's")
	}
	if !pauseSupported {
		return nil, nil, fmt.Errorf("the schedule scenario pauses processes: %w", pauseProcess(nil))
	}
	cfg := o.schedule
	if cfg == nil {
		c := scheduleDefaults(soakDuration(o))
		cfg = &c
	}
	seed := soakSeed(o)
	fmt.Fprintf(progress, "schedule: seed %d (replay with -seed %d), %v, %d schedulers, claim timeout %v\n",
		seed, seed, cfg.Duration, cfg.Schedulers, cfg.ClaimTimeout)
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	r := &scheduleRun{cfg: *cfg, seed: seed, rng: newLockedRand(seed, 0), progress: progress, exe: exe, born: time.Now()}
	rec, err := r.run(ctx)
	if err != nil {
		return nil, nil, soakFailed(err, seed, r.dir)
	}
	lines := scheduleLines(rec, r.verdict)
	recs := []record{{Scenario: "schedule", Own: rec}}
	if !rec.OK {
		return recs, lines, fmt.Errorf("%w (seed %d): missing %d, duplicated %d, late %d, unexpected %d; the run's records are kept in %s",
			errScheduleVerdict, seed, rec.Missing, rec.Duplicated, rec.Late, rec.Unexpected, r.dir)
	}
	return recs, lines, nil
}

// scheduleLines are the table's account of a run.
func scheduleLines(r scheduleRecord, v scheduleVerdict) []string {
	verdict := "PASS"
	if !r.OK {
		verdict = "FAIL"
	}
	lines := []string{
		fmt.Sprintf("seed %d, %.0f s of faults, %d schedulers (%d processes in all), schedules %s, claim timeout %.0f s, grace %.0f s",
			r.Seed, r.DurationS, r.Schedulers, r.Processes, strings.Join(r.Schedules, " and "), r.ClaimS, r.GraceS),
		fmt.Sprintf("faults: %d kills (%d aimed at a claim or a send), %d pauses (%d aimed)", r.Kills, r.KillsAimed, r.Pauses, r.PausesAimed),
		fmt.Sprintf("occurrences in the %.0f s window: %d expected, %d handled; missing %d, duplicated %d, skipped %d, unexpected %d",
			r.WindowS, r.Occurrences, r.Handled, r.Missing, r.Duplicated, r.Skipped, r.Unexpected),
		fmt.Sprintf("lateness: at most %.1f s; %d beyond the bound of %.0f s, %d sent as late, %d held up by a fault (over half the claim timeout)",
			r.MaxLateS, r.Late, r.LateBoundS, r.LateFlagged, r.Delayed),
		fmt.Sprintf("duplicates dropped by the listener, unhandled: %d; the records say %d sent, %d skipped",
			r.DuplicatesDropped, r.StateSent, r.StateSkipped),
		fmt.Sprintf("requests per occurrence: %.2f (schedulers %d, the listener's marks %d; the documented cost with %d instances is %d, besides restarts and takeovers)",
			r.RequestsPerOccurrence, r.SchedulerRequests, r.MarkRequests, r.Schedulers, 3+1+(r.Schedulers-1)+1),
	}
	for _, l := range []struct {
		what string
		at   []string
	}{{"missing", v.MissingAt}, {"duplicated", v.DuplicatedAt}, {"late", v.LateAt}, {"unexpected", v.UnexpectedAt}} {
		if len(l.at) > 0 {
			lines = append(lines, l.what+": "+strings.Join(l.at, ", "))
		}
	}
	return append(lines, "verdict: "+verdict)
}
