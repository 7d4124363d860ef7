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

// The chaos scenario is a soak: publishers feed one queue at a modest rate
// while worker processes (this binary again, each running a Listener)
// consume it, and faults are injected at random from a seed:
//
//   - 503 ServerBusy and 500 OperationTimedOut answers, made up by the
//     transport without making the request, some with Retry-After;
//   - responses lost after the service acted, for receives, deletes,
//     updates and sends;
//   - connections that accept and never answer, from a TCP proxy in front
//     of the emulator (the workers' Retry.TryTimeout is 3 s, so a hang costs
//     seconds);
//   - SIGKILL of a worker process, and its restart;
//   - storms of 503s on deletes, long enough that the handled messages
//     come back more often than MaxDequeueCount allows.
//
// At the end it stops injecting, lets the queue drain, reads the poison
// queue and judges every message as chaos_check.go says.
//
// The model, and why it is sound. The memory of handled messages
// (State.HandledBefore) belongs to one listener: a message whose delete
// failed in worker A comes back with a higher DequeueCount, and if that
// count has passed MaxDequeueCount when it reaches worker B, B poisons it
// before running the handler, by design (as the Azure Functions queue
// trigger does: B cannot know it was handled). Lost receive responses,
// kills and lost renewals also raise a message's DequeueCount without
// anyone finishing it. So:
//
//   - the random faults are rare enough that a message wasting five
//     deliveries in a row by chance is negligible (about 3% of deliveries
//     are wasted in the default configuration: 0.03^5, fewer than 1
//     message in 10^7);
//   - a storm hits the deletes of one worker (its target) while it is the
//     only one consuming: the others' receives are refused with 503 too,
//     as they would be by a storm over the whole account, and no other
//     fault of the workers' and no kill happens meanwhile (the publishers
//     go on sending, with their own faults). The target handles every
//     message, fails to delete it, receives it again after the visibility
//     timeout, and so on, until a handled message has come back past
//     MaxDequeueCount. The storm then ends for the target first, and the
//     others consume again only once every message it failed to delete
//     has come back to it and been deleted. What is checked is then the
//     library's guarantee: a message handled in a process is never
//     poisoned there for its failed deletes, and once a delete of it has
//     failed, never handled there again. (It can be handled again before:
//     a redelivery that arrives while the failing delete is still being
//     retried finds nothing remembered yet.)
//
// Kills are where the guarantee ends: a killed process's memory goes with
// it, and its messages come back to others with their counts. The
// duplicate bound allows for that.

// chaosConfig shapes a chaos run.
type chaosConfig struct {
	Duration   time.Duration // of the injection; the drain comes after
	Workers    int
	Rate       float64 // messages sent a second
	Publishers int     // sending goroutines

	Visibility time.Duration // the workers' VisibilityTimeout
	TryTimeout time.Duration // the workers' Retry.TryTimeout
	MaxDequeue int64         // the workers' MaxDequeueCount

	Worker    faultRates // the workers' transports
	Publisher faultRates // the publishers' transport
	HangRate  float64    // of new connections through the proxy
	IdleClose [2]time.Duration

	LongShare   float64 // of handler calls, those long enough to be renewed
	Short, Long [2]time.Duration

	KillEvery    [2]time.Duration
	RestartAfter [2]time.Duration

	StormGap  [2]time.Duration // calm between storms
	StormMin  time.Duration    // a storm lasts at least this
	StormCap  time.Duration    // and at most this
	GraceCap  time.Duration    // the most the others wait for the target's memory to empty
	StormLead time.Duration    // no storm starts closer than this to the end

	Drain time.Duration // the most the drain may take
}

// chaosDefaults is the soak's configuration: each fault kind about 10
// times or more in a 10-minute run, and the emulator well within its
// comfort (tens of messages a second, a few hundred held at most).
func chaosDefaults(d time.Duration) chaosConfig {
	return chaosConfig{
		Duration: d, Workers: 3, Rate: 15, Publishers: 4,
		Visibility: 4 * time.Second, TryTimeout: 3 * time.Second, MaxDequeue: 5,
		Worker:    faultRates{ServerBusy: 0.01, Timeout: 0.006, RetryAfter: 0.3, LostReceive: 0.03, LostDelete: 0.02, LostUpdate: 0.12},
		Publisher: faultRates{ServerBusy: 0.005, Timeout: 0.003, RetryAfter: 0.3, LostSend: 0.006},
		HangRate:  0.1, IdleClose: [2]time.Duration{2 * time.Second, 6 * time.Second},
		LongShare: 0.1, Short: [2]time.Duration{time.Millisecond, 20 * time.Millisecond}, Long: [2]time.Duration{2200 * time.Millisecond, 3 * time.Second},
		KillEvery: [2]time.Duration{8 * time.Second, 20 * time.Second}, RestartAfter: [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
		StormGap: [2]time.Duration{10 * time.Second, 30 * time.Second}, StormMin: 5 * time.Second,
		StormCap: 60 * time.Second, GraceCap: 30 * time.Second, StormLead: 30 * time.Second,
		Drain: 3 * time.Minute,
	}
}

// chaosQuick is a short run's configuration: fault rates raised so that
// every kind still happens in about a minute, and still low enough that a
// message wasting five deliveries in a row by chance stays negligible.
func chaosQuick(d time.Duration) chaosConfig {
	c := chaosDefaults(d)
	c.Worker = faultRates{ServerBusy: 0.03, Timeout: 0.02, RetryAfter: 0.3, LostReceive: 0.04, LostDelete: 0.05, LostUpdate: 0.2}
	c.Publisher = faultRates{ServerBusy: 0.02, Timeout: 0.02, RetryAfter: 0.3, LostSend: 0.03}
	c.HangRate, c.IdleClose = 0.3, [2]time.Duration{time.Second, 3 * time.Second}
	c.LongShare = 0.15
	// The first kill comes before the first storm, which may take most of
	// the minute on a busy machine.
	c.KillEvery = [2]time.Duration{4 * time.Second, 7 * time.Second}
	c.StormGap = [2]time.Duration{8 * time.Second, 12 * time.Second}
	c.StormLead = 25 * time.Second
	c.StormCap = 90 * time.Second
	return c
}

// chaosRecord is the chaos scenario's -json record.
type chaosRecord struct {
	Scenario  string  `json:"scenario"`
	Seed      int64   `json:"seed"`
	DurationS float64 `json:"duration_s"`
	Workers   int     `json:"workers"`
	RatePerS  float64 `json:"rate_msgs_per_s"`

	Sent          int `json:"sent"`
	Handled       int `json:"handled"`
	Lost          int `json:"lost"`
	Unexpected    int `json:"unexpected"`
	Indeterminate int `json:"indeterminate"`
	Recovered     int `json:"recovered"` // indeterminate sends that were handled
	Refused       int `json:"refused"`   // sends answered by the transport, never made

	Duplicated         int  `json:"duplicated"`          // messages handled more than once
	DuplicateHandlings int  `json:"duplicate_handlings"` // handlings after each message's first
	DuplicateBound     int  `json:"duplicate_bound"`
	BoundHeld          bool `json:"duplicate_bound_held"`
	KillInFlight       int  `json:"kill_in_flight"`
	LostAcks           int  `json:"lost_acks"`
	LostAcksUnsent     int  `json:"lost_acks_unsent"` // of lost_acks, deletes never made: a renewal lost the message as its handler returned

	WronglyPoisoned int `json:"wrongly_poisoned"`

	Faults               map[string]int `json:"faults"`
	Storm503             int            `json:"storm_503"`               // 503 answers given during storms
	StormMaxDequeueCount int64          `json:"storm_max_dequeue_count"` // highest count at which a handled message came back to a storm's target
	StormsPastMax        int            `json:"storms_past_max_dequeue"` // storms in which one came back past MaxDequeueCount

	State        stateTotals `json:"state"` // the workers' State, summed over every process (a killed one's as last reported)
	Incarnations int         `json:"incarnations"`
	MaxDepth     int         `json:"max_depth"` // the most messages the queue held, as sampled
	DrainS       float64     `json:"drain_s"`
	OK           bool        `json:"ok"`
}

// errChaosVerdict is returned when a run finds lost, unexpected or wrongly
// poisoned messages, or more duplicates than the bound.
var errChaosVerdict = errors.New("chaos: the check failed")

func runChaos(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	if o.real {
		return nil, nil, errors.New("the chaos scenario needs a private Azurite: it puts a proxy in front of it")
	}
	cfg := o.chaos
	if cfg == nil {
		c := chaosDefaults(soakDuration(o))
		cfg = &c
	}
	seed := soakSeed(o)
	fmt.Fprintf(progress, "chaos: seed %d (replay with -seed %d), %v, %d workers, %.0f msgs/s\n",
		seed, seed, cfg.Duration, cfg.Workers, cfg.Rate)
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	r := &chaosRun{cfg: *cfg, seed: seed, rng: newLockedRand(seed, 0), progress: progress, exe: exe}
	rec, err := r.run(ctx)
	if err != nil {
		return nil, nil, soakFailed(err, seed, r.dir)
	}
	lines := chaosLines(rec, cfg)
	recs := []record{{Scenario: "chaos", Own: rec}}
	if !rec.OK {
		return recs, lines, fmt.Errorf("%w (seed %d): lost %d, unexpected %d, wrongly poisoned %d, duplicate handlings %d against a bound of %d; the run's records are kept in %s",
			errChaosVerdict, seed, rec.Lost, rec.Unexpected, rec.WronglyPoisoned, rec.DuplicateHandlings, rec.DuplicateBound, r.dir)
	}
	return recs, lines, nil
}

// chaosLines are the table's account of a run.
func chaosLines(r chaosRecord, cfg *chaosConfig) []string {
	var faults []string
	for _, k := range faultKinds {
		faults = append(faults, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	held := "held"
	if !r.BoundHeld {
		held = "EXCEEDED"
	}
	verdict := "PASS"
	if !r.OK {
		verdict = "FAIL"
	}
	return []string{
		fmt.Sprintf("seed %d, %.0f s of faults, %d workers (%d processes in all), %.0f msgs/s, at most %d held",
			r.Seed, r.DurationS, r.Workers, r.Incarnations, r.RatePerS, r.MaxDepth),
		fmt.Sprintf("sent %d acknowledged, %d indeterminate (%d of them handled), %d refused; %d messages handled",
			r.Sent, r.Indeterminate, r.Recovered, r.Refused, r.Handled),
		fmt.Sprintf("lost %d, unexpected %d, wrongly poisoned %d, duplicated %d (%d extra handlings)",
			r.Lost, r.Unexpected, r.WronglyPoisoned, r.Duplicated, r.DuplicateHandlings),
		fmt.Sprintf("duplicate bound: %d extra handlings ≤ %d in flight at kills + %d lost acknowledgements (%d of them deletes never made) = %d: %s",
			r.DuplicateHandlings, r.KillInFlight, r.LostAcks, r.LostAcksUnsent, r.DuplicateBound, held),
		"faults: " + strings.Join(faults, ", ") + fmt.Sprintf(" (%d answers in storms)", r.Storm503),
		fmt.Sprintf("storms: handled messages came back to the target up to dequeue count %d (MaxDequeueCount %d), past it in %d of %d storms",
			r.StormMaxDequeueCount, cfg.MaxDequeue, r.StormsPastMax, r.Faults[faultStorm]),
		fmt.Sprintf("workers' State: HandledBefore %d, Lost %d, Retried %d, Poisoned %d, Succeeded %d, Received %d, ReceiveErrors %d",
			r.State.HandledBefore, r.State.Lost, r.State.Retried, r.State.Poisoned, r.State.Succeeded, r.State.Received, r.State.ReceiveErrors),
		fmt.Sprintf("drained in %.1f s; verdict: %s", r.DrainS, verdict),
	}
}
