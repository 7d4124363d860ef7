// Command azdispatch-load measures azdispatch against a baseline in the same
// run, and prints the ratios. By default every run gets a fresh private
// Azurite (the emulator slows with the messages it holds and stalls after
// many deletes, so sharing one would measure the emulator, not the client);
// with -real it uses the account in AZDISPATCH_CONNECTION_STRING instead.
//
//	go run ./cmd/azdispatch-load                      # all scenarios, a table
//	go run ./cmd/azdispatch-load -scenario drain -latency 10ms
//	go run ./cmd/azdispatch-load -json                # one JSON object per line
//	go run ./cmd/azdispatch-load -scenario chaos -duration 10m -seed 42
//	go run ./cmd/azdispatch-load -scenario schedule -duration 3m -json
//	go run ./cmd/azdispatch-load -scenario latency -json
//	go run ./cmd/azdispatch-load -scenario pause -json   # -duration sets the pause (default 30s)
//	go run ./cmd/azdispatch-load -scenario idle-paused   # -duration sets the window (default 10m)
//	go run ./cmd/azdispatch-load -scenario batch-handler -json
//	go run ./cmd/azdispatch-load -scenario groups -duration 10m -json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"time"
)

// options are the command line.
type options struct {
	scenario string
	json     bool
	latency  time.Duration
	messages int
	rounds   int
	limit    time.Duration
	real     bool
	sim      simTiming  // zero: the simulated scenario's defaults
	idle     idleTiming // zero: the idle-sharded scenario's defaults
	duration time.Duration
	seed     int64
	chaos    *chaosConfig    // nil: the chaos scenario's defaults for duration
	schedule *scheduleConfig // nil: the schedule scenario's defaults for duration
	wait     *latencyConfig  // nil: the latency scenario's defaults
	priority priorityConfig  // zero: the priority scenario's defaults
	fairness fairnessConfig  // zero: the fairness scenario's defaults
	keys     keysConfig      // zero: the keys scenario's defaults
	groups   groupsConfig    // zero: the groups scenario's defaults
	// batchHandler sizes the batch-handler scenario; zero: its defaults.
	batchHandler batchHandlerConfig
}

// record is one line of -json output.
type record struct {
	Scenario  string             `json:"scenario"`
	Variant   string             `json:"variant"`
	MsgsPerS  float64            `json:"msgs_per_s,omitempty"`
	TxPerMsg  float64            `json:"tx_per_msg,omitempty"`
	Runs      []float64          `json:"runs_msgs_per_s,omitempty"`
	Messages  int                `json:"messages,omitempty"`
	LatencyMS float64            `json:"latency_ms"`
	DrainS    float64            `json:"drain_s,omitempty"` // burst: median seconds to drain
	P50MS     float64            `json:"p50_ms,omitempty"`  // wake: send to handler start
	P99MS     float64            `json:"p99_ms,omitempty"`  // wake: send to handler start
	Ratios    map[string]float64 `json:"ratios,omitempty"`

	// Wake: P50MS and P99MS ÷ raw-poll's, measured alongside (a floor).
	P50VsRaw float64 `json:"p50_vs_raw,omitempty"`
	P99VsRaw float64 `json:"p99_vs_raw,omitempty"`

	// Overhead: the listener's own cost per message over an in-memory queue.
	CPUUsPerMsg  float64 `json:"cpu_us_per_msg,omitempty"`
	AllocsPerMsg float64 `json:"allocs_per_msg,omitempty"`
	BytesPerMsg  float64 `json:"bytes_per_msg,omitempty"`

	// Sharded scenarios.
	AzuriteCPUS     float64   `json:"azurite_cpu_s,omitempty"`      // emulator CPU seconds, all processes
	AzuriteCPUEach  []float64 `json:"azurite_cpu_s_each,omitempty"` // per emulator process
	ShardMaxOverMin float64   `json:"shard_max_over_min,omitempty"` // busiest shard's messages ÷ idlest's
	ServerBusy      *int64    `json:"server_busy,omitempty"`        // simulated: 503 answers per run, 0 included
	Requests        int64     `json:"requests,omitempty"`           // idle scenarios: requests made in the window

	// Own, when set, is printed instead: the record of a scenario with a
	// shape of its own (chaos, schedule).
	Own any `json:"-"`
}

// scenario runs one comparison and returns its records and a few lines of
// conclusions for the table.
type scenario func(ctx context.Context, o options, progress io.Writer) ([]record, []string, error)

var scenarios = map[string]scenario{
	"drain":         runDrain,
	"idle":          runIdle,
	"burst":         runBurst,
	"wake":          runWake,
	"simulated":     runSimulated,
	"sharded":       runSharded,
	"idle-sharded":  runIdleSharded,
	"batch":         runBatch,
	"overhead":      runOverhead,
	"chaos":         runChaos,
	"schedule":      runSchedule,
	"latency":       runLatency,
	"priority":      runPriority,
	"fairness":      runFairness,
	"keys":          runKeys,
	"pause":         runQueuePause,
	"idle-paused":   runIdlePaused,
	"batch-handler": runBatchHandler,
	"groups":        runGroups,
}

// soaks judge rather than measure, or take minutes of their own, and run
// only when named.
var soaks = []string{"chaos", "schedule", "pause", "idle-paused", "batch-handler", "groups"}

func main() {
	if code, ok := runRole(); ok {
		os.Exit(code) // a scenario's child: a chaos worker, a scheduler, a keys or pause worker
	}
	var o options
	flag.StringVar(&o.scenario, "scenario", "all", "scenario to run: all (every one but "+strings.Join(soaks, ", ")+"), "+strings.Join(names(), ", "))
	flag.BoolVar(&o.json, "json", false, "print one JSON object per line instead of a table")
	flag.DurationVar(&o.latency, "latency", 0, "add this to every request, a stand-in for the round trip to a real account (latency scenario: 20ms if not given)")
	flag.IntVar(&o.messages, "messages", 1000, "messages per run (Azurite slows past about 1,000 held)")
	flag.IntVar(&o.rounds, "rounds", 5, "runs per variant; the median is reported")
	flag.DurationVar(&o.limit, "limit", 15*time.Second, "longest a run may take; a slow variant's rate is measured over this window")
	flag.BoolVar(&o.real, "real", false, "use the account in AZDISPATCH_CONNECTION_STRING instead of private Azurite processes")
	flag.DurationVar(&o.duration, "duration", 0, "chaos, schedule, groups: how long to inject faults (default 3m); latency: each variant's measured window (default 1m); pause: the pause (default 30s); idle-paused: the window (default 10m)")
	flag.Int64Var(&o.seed, "seed", 0, "chaos, schedule: the seed of the faults' random draws, to replay a run's schedule; latency: of the arrivals (default random, printed)")
	flag.IntVar(&o.keys.Keys, "keys", 0, "keys: how many keys (default 1,000)")
	flag.IntVar(&o.keys.Each, "each", 0, "keys: messages of each key (default 50)")
	flag.DurationVar(&o.keys.Hold, "hold", 0, "keys: a handler call's time (default 100ms)")
	flag.StringVar(&o.keys.Only, "variant", "", "keys: run this variant alone after the one with no limit (per-key, fleet, in-order); groups: this one alone (soak, big)")
	flag.IntVar(&o.keys.Emulators, "emulators", 0, "keys: emulators to spread the queue over, one shard each, with the blobs on one more when above 1 (default 1)")
	flag.BoolVar(&o.keys.Keep, "keep", false, "keys: keep the processes' stderr files, and say where")
	o.wait = latencyFlags(flag.CommandLine)
	flag.Parse()
	o.groups.Only = o.keys.Only

	// All is every benchmark, not the soaks.
	run := slices.DeleteFunc(names(), func(n string) bool { return slices.Contains(soaks, n) })
	if o.scenario != "all" {
		if _, ok := scenarios[o.scenario]; !ok {
			fmt.Fprintf(os.Stderr, "unknown scenario %q (have %s)\n", o.scenario, strings.Join(names(), ", "))
			os.Exit(2)
		}
		run = []string{o.scenario}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	progress := io.Writer(os.Stderr)
	failed := false
	for _, name := range run {
		recs, lines, err := scenarios[name](ctx, o, progress)
		if err != nil && len(recs) == 0 {
			fmt.Fprintf(os.Stderr, "scenario %s: %v\n", name, err)
			os.Exit(1)
		}
		// A scenario that judges (a soak) returns its records with the
		// error of a failed check: print them, then fail.
		if o.json {
			enc := json.NewEncoder(os.Stdout)
			for _, r := range recs {
				if r.Own != nil {
					_ = enc.Encode(r.Own)
					continue
				}
				_ = enc.Encode(r)
			}
		} else {
			printTable(os.Stdout, name, o, recs, lines)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "scenario %s: %v\n", name, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func names() []string {
	var n []string
	for k := range scenarios {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// printTable prints a throughput table for scenarios that measure one, then
// the scenario's own lines.
func printTable(w io.Writer, name string, o options, recs []record, lines []string) {
	// The overhead scenario's lines are its table: it sends no 1 KiB
	// messages and adds no latency.
	if name == "overhead" || !slices.ContainsFunc(recs, func(r record) bool { return r.MsgsPerS > 0 }) {
		fmt.Fprintf(w, "\nscenario %s\n", name)
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
		return
	}
	fmt.Fprintf(w, "\nscenario %s: %d messages of 1 KiB per run, %d rounds, added latency %v\n", name, o.messages, o.rounds, o.latency)
	fmt.Fprintf(w, "%-16s %9s %8s   %s\n", "variant", "msgs/s", "tx/msg", "runs (msgs/s)")
	for _, r := range recs {
		runs := make([]string, len(r.Runs))
		for i, v := range r.Runs {
			runs[i] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(w, "%-16s %9.0f %8.3f   %s\n", r.Variant, r.MsgsPerS, r.TxPerMsg, strings.Join(runs, " "))
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
