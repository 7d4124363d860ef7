package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azdispatch/azdispatch"
)

// A groups worker is the load-test binary run again by the groups
// scenario, in a process of its own so that it can be killed and paused:
// a listener on each of the children's queues and one on the
// continuations' queue, all in one account whose every request goes
// through a transport that makes storage faults. It reports on stdout,
// a JSON line each, every child's handler end (written before the handler
// returns, so that no finish is recorded before its report), every
// continuation's handler start, and its account's transactions twice a
// second. It stops at "stop" on stdin.
var groupsRole = childRole{name: "groups worker", config: "AZDISPATCH_GROUPS_WORKER", conn: "AZDISPATCH_GROUPS_CONNECTION"}

// groupsWorkerConfig is what the coordinator tells a worker.
type groupsWorkerConfig struct {
	Queues      []string      `json:"queues"` // the children's
	Done        string        `json:"done"`   // the continuations'
	Seed        int64         `json:"seed"`
	Stream      uint64        `json:"stream"`
	Concurrency int           `json:"concurrency"`
	Hold        time.Duration `json:"hold"`      // a child's handler takes up to this long
	Transient   float64       `json:"transient"` // of a child's tries: fails, to be retried
	Faults      faultRates    `json:"faults"`
	Visibility  time.Duration `json:"visibility"`
	Trace       bool          `json:"trace"` // report the steps of groups' completions (see groupsTrace)
}

// groupsChild is a child's body: its group, its index, and whether its
// handler fails it for good (it is then poisoned, and its group counts it
// failed).
type groupsChild struct {
	G    string `json:"g"`
	I    int    `json:"i"`
	Fail bool   `json:"f,omitempty"`
}

// groupsNext is a continuation's body.
type groupsNext struct {
	G string `json:"g"`
}

// groupsReport is one line of a worker's stdout.
type groupsReport struct {
	Kind string `json:"k"` // "end", "next", "tx" or "trace"
	G    string `json:"g,omitempty"`
	I    int    `json:"i"`
	Fail bool   `json:"f,omitempty"`
	At   int64  `json:"at,omitempty"` // Unix nanoseconds

	// A trace's: what step, and when it came back (At: went out).
	What string `json:"w,omitempty"`
	Done int64  `json:"d,omitempty"`

	// A continuation's.
	ID      string                   `json:"id,omitempty"` // its message's
	Outcome *azdispatch.GroupOutcome `json:"o,omitempty"`

	// The accounts' requests (blob ones, and all), and the
	// continuations' duplicates dropped.
	Blob       int64 `json:"blob,omitempty"`
	All        int64 `json:"all,omitempty"`
	Duplicates int64 `json:"dup,omitempty"`
}

func runGroupsWorker(cfg groupsWorkerConfig, cs string, commands io.Reader, status io.Writer) error {
	rng := newLockedRand(cfg.Seed, cfg.Stream)
	var outMu sync.Mutex
	out := json.NewEncoder(status)
	report := func(r groupsReport) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = out.Encode(r)
	}
	faults := &faultTransport{next: newHTTPClient(), rng: rng, rates: cfg.Faults, spared: "-poison",
		note: func(*http.Request, string, requestOp, string) {}}
	var transport policy.Transporter = faults
	if cfg.Trace {
		transport = &groupsTrace{next: faults, done: cfg.Done, report: report}
	}
	accts, err := openGroupsAccounts(splitKeysAccounts(cs), transport)
	if err != nil {
		return err
	}
	store, err := accts.blobs.PayloadStore("")
	if err != nil {
		return err
	}
	child := func(ctx context.Context, m *azdispatch.Message[groupsChild]) error {
		if rng.chance(cfg.Transient) {
			return errors.New("a transient failure, by design")
		}
		if !m.Body.Fail {
			if err := sleepCtx(ctx, rng.between(0, cfg.Hold)); err != nil {
				return err
			}
		}
		report(groupsReport{Kind: "end", G: m.Body.G, I: m.Body.I, Fail: m.Body.Fail, At: time.Now().UnixNano()})
		if m.Body.Fail {
			return azdispatch.Permanent(fmt.Errorf("child %d of %s fails, by design", m.Body.I, m.Body.G))
		}
		return nil
	}
	next := func(_ context.Context, m *azdispatch.Message[groupsNext]) error {
		at := time.Now().UnixNano()
		o, _ := azdispatch.GroupOutcomeOf(m.MessageInfo)
		report(groupsReport{Kind: "next", G: m.Body.G, ID: m.ID, Outcome: o, At: at})
		return nil
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := func(idle time.Duration) *azdispatch.ListenerOptions {
		return &azdispatch.ListenerOptions{
			Concurrency: cfg.Concurrency, VisibilityTimeout: cfg.Visibility, MaxDequeueCount: 20,
			Retry: func(int64) time.Duration { return 500 * time.Millisecond },
			// The continuations' queue is on the blobs' emulator.
			Payloads: azdispatch.PayloadOptions{Store: store, Continue: func(name string) (azdispatch.Target, error) { return accts.blobs.Queue(name) }},
			Scaling:  azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, idle)},
			Logger:   logger,
		}
	}
	var children []*azdispatch.Listener[groupsChild]
	for i, name := range cfg.Queues {
		q, err := accts.queue(i, name)
		if err != nil {
			return err
		}
		l, err := azdispatch.NewListener(q, child, opts(time.Second))
		if err != nil {
			return err
		}
		children = append(children, l)
	}
	dq, err := accts.blobs.Queue(cfg.Done)
	if err != nil {
		return err
	}
	// The continuations' listener looks often, so that what the scenario
	// measures is how soon a continuation is sent, not this wait.
	nl, err := azdispatch.NewListener(dq, next, opts(100*time.Millisecond))
	if err != nil {
		return err
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var bg sync.WaitGroup
	bg.Go(func() { readStop(commands, stop) })
	tell := func() {
		blob, all := accts.requests()
		report(groupsReport{Kind: "tx", Blob: blob, All: all, Duplicates: nl.State().Duplicates})
	}
	bg.Go(func() {
		for sleepCtx(ctx, 500*time.Millisecond) == nil {
			tell()
		}
	})
	tell()
	errs := make([]error, len(children)+1)
	var run sync.WaitGroup
	for i, l := range children {
		run.Go(func() { errs[i] = l.Run(ctx) })
	}
	run.Go(func() { errs[len(children)] = nl.Run(ctx) })
	run.Wait()
	stop()
	bg.Wait()
	tell()
	for i, err := range errs {
		if errors.Is(err, context.Canceled) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}
