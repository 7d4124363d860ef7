package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// The groups scenario is a soak of groups and their continuations, in two
// variants, each on a fresh emulator.
//
// soak: three worker processes (this binary again, see groups_worker.go),
// each listening on three children's queues and on the continuations'
// queue, handle groups of 1 to 1,000 children (sizes log-uniform) that this
// process starts and sends for the configured duration, under every rule:
// ContinueOnSuccess with children that fail only now and then (retried);
// ContinueOnFinish and ContinueOnFailure with, in half the groups, a few
// children that fail for good (poisoned). Meanwhile a worker is killed
// (SIGKILL, restarted at once) every few seconds and one is paused
// (SIGSTOP, then SIGCONT) now and then, and every worker's storage
// requests fail (503s on queue requests and blob writes) and lose their
// answers after taking effect (receives, deletes, sends, Append Blocks and
// Put Blobs), so that the SDK tries a done write again; this process's
// sends lose answers too, so that some children are sent twice. After the
// faults stop, the groups have a while to complete.
//
// The verdict: every group whose rule is met gets its continuation handled
// from exactly one message (copies sent by two finishes that completed the
// group at once, or by a finish whose process died before marking the
// group continued, are dropped as duplicates); none is handled before the
// children its rule needs had finished, nor says other than what they did;
// a ContinueOnFailure group whose children all succeeded gets none; every
// child is handled. The blob requests per child are printed, and held to
// the budget: two per child and three per group.
//
// big: groups of 10,000 children, one after another, over the same three
// queues and workers with no faults: how soon each group's continuation
// is handled after its last child's handler returned (the p99, over the
// groups, is held to 2 s). The continuations' listeners look every 100 ms
// at most, so this is how soon it was sent, plus that. The sends are paced
// below what the emulators drain (BigRate): on a shared machine, emulators
// driven flat out queue each other's requests for seconds, the Append
// Blocks of the last children among them. Each group's line says when
// the last of each step of its completion went out and came back.

// groupsConfig shapes a groups run; the zero value of a field is its
// default, and a test shrinks it.
type groupsConfig struct {
	Duration    time.Duration // of the faults, and of new groups (soak)
	Settle      time.Duration // after it, the most the groups may take to complete
	Workers     int
	Queues      int
	MaxChildren int     // a soak group's largest
	Backlog     int     // children sent and not yet handled, at most (soak)
	Rate        float64 // children sent per second, at most (soak)
	Concurrency int
	Hold        time.Duration // a child's handler takes up to this long
	Transient   float64       // of a child's tries: fails, to be retried
	Faults      faultRates    // the workers'
	Publisher   faultRates    // this process's sends
	Visibility  time.Duration
	KillEvery   [2]time.Duration
	PauseEvery  [2]time.Duration
	PauseFor    time.Duration

	BigGroups int           // big: how many groups
	BigSize   int           // big: of how many children each
	BigBound  time.Duration // big: the p99 bound
	// BigRate paces big's sends (children a second): below what the
	// emulators drain, so that the measure is the library's, not the
	// queue of requests of a saturated emulator on a shared machine. 0:
	// 150; negative: as fast as they go.
	BigRate float64
	Only    string // "soak" or "big": that variant alone
}

func (c groupsConfig) withDefaults(d time.Duration) groupsConfig {
	setIf(&c.Duration, d)
	setIf(&c.Settle, 3*time.Minute)
	setIf(&c.Workers, 3)
	setIf(&c.Queues, 3)
	setIf(&c.MaxChildren, 1000)
	setIf(&c.Backlog, 1500)
	setIf(&c.Rate, 100)
	setIf(&c.Concurrency, 8)
	setIf(&c.Hold, 20*time.Millisecond)
	setIf(&c.Transient, 0.02)
	setIf(&c.Visibility, 5*time.Second)
	setIf(&c.KillEvery, [2]time.Duration{3 * time.Second, 8 * time.Second})
	setIf(&c.PauseEvery, [2]time.Duration{8 * time.Second, 16 * time.Second})
	setIf(&c.PauseFor, 4*time.Second)
	setIf(&c.BigGroups, 5)
	setIf(&c.BigSize, 10_000)
	setIf(&c.BigBound, 2*time.Second)
	setIf(&c.BigRate, 150)
	if c.Faults == (faultRates{}) {
		c.Faults = faultRates{ServerBusy: 0.005, Timeout: 0.002, RetryAfter: 0.2, LostReceive: 0.003, LostDelete: 0.005,
			LostUpdate: 0.005, LostSend: 0.01, BlobBusy: 0.005, LostBlob: 0.01}
	}
	if c.Publisher == (faultRates{}) {
		c.Publisher = faultRates{LostSend: 0.005}
	}
	return c
}

// groupsRecord is one line of the groups scenario's -json output.
type groupsRecord struct {
	Scenario  string  `json:"scenario"`
	Variant   string  `json:"variant"`
	Seed      int64   `json:"seed"`
	DurationS float64 `json:"duration_s"`
	OK        bool    `json:"ok"`

	Groups        int            `json:"groups"`
	ByRule        map[string]int `json:"groups_by_rule"`
	Children      int            `json:"children"`
	Expected      int            `json:"continuations_expected"`
	Continued     int            `json:"continued"`            // groups whose continuation was handled
	Twice         int            `json:"continued_twice"`      // from more than one message
	Early         int            `json:"continued_early"`      // before the children their rule needs had finished
	Wrong         int            `json:"continued_wrongly"`    // saying other than what the children did
	Unexpected    int            `json:"continued_unexpected"` // a group whose rule is not met
	Missing       int            `json:"missing"`              // expected, never handled
	LostChildren  int            `json:"lost_children"`        // never handled
	Repeated      int            `json:"repeated_calls"`       // a child's handler calls past its first (at least once)
	DupsDropped   int64          `json:"duplicates_dropped"`   // continuations' copies, dropped unhandled
	Kills         int            `json:"kills"`
	Pauses        int            `json:"pauses"`
	Processes     int            `json:"processes"`
	BlobRequests  int64          `json:"blob_requests"` // every process's, this one's StartGroups included
	BlobPerChild  float64        `json:"blob_requests_per_child"`
	Budget        int64          `json:"blob_budget"` // 2 per child and 3 per group
	TxPerChild    float64        `json:"requests_per_child"`
	LatencyP50S   float64        `json:"latency_p50_s,omitempty"` // big: continuation handled after the last child's handler returned
	LatencyP99S   float64        `json:"latency_p99_s,omitempty"`
	LatencyMaxS   float64        `json:"latency_max_s,omitempty"`
	LatencyBoundS float64        `json:"latency_bound_s,omitempty"`

	Problems []string `json:"problems,omitempty"` // the first few, for a look
}

// errGroupsVerdict is returned when a variant's check fails.
var errGroupsVerdict = errors.New("groups: the check failed")

func runGroups(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	if o.real {
		return nil, nil, errors.New("the groups scenario needs private Azurite processes: it kills and pauses its workers, and measures on this machine's clock")
	}
	c := o.groups.withDefaults(soakDuration(o))
	seed := soakSeed(o)
	var recs []record
	var lines []string
	var failed []string
	for _, v := range []string{"soak", "big"} {
		if c.Only != "" && c.Only != v {
			continue
		}
		fmt.Fprintf(progress, "groups: %s, seed %d (replay with -seed %d)\n", v, seed, seed)
		r := &groupsRun{cfg: c, seed: seed, variant: v, rng: newLockedRand(seed, 0), progress: progress, born: time.Now()}
		rec, err := r.run(ctx)
		if err != nil {
			return nil, nil, soakFailed(fmt.Errorf("%s: %w", v, err), seed, r.dir)
		}
		recs = append(recs, record{Own: rec})
		lines = append(lines, groupsLines(rec)...)
		if !rec.OK {
			failed = append(failed, v)
		}
	}
	if len(failed) > 0 {
		return recs, lines, fmt.Errorf("%w: %v (seed %d)", errGroupsVerdict, failed, seed)
	}
	return recs, lines, nil
}

// groupsLines are the table's account of a variant.
func groupsLines(r groupsRecord) []string {
	lines := []string{
		fmt.Sprintf("%s: %d groups (%v), %d children, %.0f s; %d kills, %d pauses, %d processes",
			r.Variant, r.Groups, r.ByRule, r.Children, r.DurationS, r.Kills, r.Pauses, r.Processes),
		fmt.Sprintf("  continuations: %d expected, %d handled; twice %d, early %d, wrong %d, unexpected %d, missing %d; %d copies dropped as duplicates",
			r.Expected, r.Continued, r.Twice, r.Early, r.Wrong, r.Unexpected, r.Missing, r.DupsDropped),
		fmt.Sprintf("  children: %d lost, %d handler calls past the first; blob requests %d (%.3f per child, budget %d), requests %.2f per child",
			r.LostChildren, r.Repeated, r.BlobRequests, r.BlobPerChild, r.Budget, r.TxPerChild),
	}
	if r.Variant == "big" {
		lines = append(lines, fmt.Sprintf("  continuation after the last child's handler returned: p50 %.2f s, p99 %.2f s, max %.2f s (bound %.1f s)",
			r.LatencyP50S, r.LatencyP99S, r.LatencyMaxS, r.LatencyBoundS))
	}
	for _, p := range r.Problems {
		lines = append(lines, "  "+p)
	}
	return append(lines, fmt.Sprintf("  ok %v", r.OK))
}
