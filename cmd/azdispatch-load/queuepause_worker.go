package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// A pause worker is the load-test binary run again by the pause scenario,
// in a process of its own, as a fleet's listeners would be: one listener
// on the scenario's queue with the default scaling but for its interval.
// It reports on stdout, a JSON line each, every receive and every read of
// the queue's properties its requests make (see requestWatch), every
// handler call as it starts and as it ends (before the handler returns, so
// that no message deleted is missing from the record), its listener's
// pause and messages in hand whenever they change, and at the end what
// the listener counted. It stops at "stop" on stdin.
var queuePauseRole = childRole{name: "pause worker", config: "AZDISPATCH_PAUSE_WORKER", conn: "AZDISPATCH_PAUSE_CONNECTION"}

// queuePauseWorkerConfig is what the coordinator tells a worker.
type queuePauseWorkerConfig struct {
	Queue    string        `json:"queue"`
	Worker   int           `json:"worker"`
	Seed     int64         `json:"seed"`
	Interval time.Duration `json:"interval"` // ScalingOptions.ScaleInterval; 0: the default
	HoldMin  time.Duration `json:"hold_min"`
	HoldMax  time.Duration `json:"hold_max"`
}

// The kinds of a worker's report lines.
const (
	pauseWorkerReceive = "rx"     // a receive: At its start, N the messages it brought
	pauseWorkerRead    = "read"   // a Get Queue Properties: At its start
	pauseWorkerStart   = "start"  // a handler call started: At, N the message's number
	pauseWorkerEnd     = "end"    // a handler call ended: At, N, Failed if it returned an error
	pauseWorkerStatus  = "status" // the listener's pause and messages in hand changed
	pauseWorkerFinal   = "final"  // the listener's counts, once it has stopped
)

// queuePauseReport is one line of a worker's stdout. Times are Unix
// nanoseconds on the worker's clock: the machine's, which the coordinator
// shares.
type queuePauseReport struct {
	Kind     string            `json:"k"`
	At       int64             `json:"t,omitempty"`
	N        int               `json:"n,omitempty"`
	Failed   bool              `json:"failed,omitempty"`    // rx, read: no good answer; end: the handler failed
	InFlight int               `json:"in_flight,omitempty"` // status: State.InFlight
	Paused   bool              `json:"paused,omitempty"`    // status: Listener.Paused holds
	Until    time.Time         `json:"until,omitzero"`      // status: State.Paused.Until
	Final    *queuePauseCounts `json:"final,omitempty"`
}

// queuePauseCounts are what a worker's listener counted, at its end.
type queuePauseCounts struct {
	Received, Succeeded int64
	Transactions        azdispatch.Transactions
}

func runQueuePauseWorker(cfg queuePauseWorkerConfig, cs string, commands io.Reader, reports io.Writer) error {
	var outMu sync.Mutex
	out := json.NewEncoder(reports)
	report := func(r queuePauseReport) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = out.Encode(r)
	}
	watch := requestWatch{next: newHTTPClient(), saw: func(kind string, start time.Time, messages int, failed bool) {
		report(queuePauseReport{Kind: kind, At: start.UnixNano(), N: messages, Failed: failed})
	}}
	acct, err := azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{Transport: watch}},
	})
	if err != nil {
		return err
	}
	q, err := acct.Queue(cfg.Queue)
	if err != nil {
		return err
	}
	rng := newLockedRand(cfg.Seed, uint64(cfg.Worker)+1)
	handler := func(ctx context.Context, m *azdispatch.Message[string]) error {
		n, _ := strconv.Atoi(strings.TrimSpace(m.Body))
		report(queuePauseReport{Kind: pauseWorkerStart, At: time.Now().UnixNano(), N: n})
		err := sleepCtx(ctx, rng.between(cfg.HoldMin, cfg.HoldMax))
		report(queuePauseReport{Kind: pauseWorkerEnd, At: time.Now().UnixNano(), N: n, Failed: err != nil})
		return err
	}
	l, err := azdispatch.NewListener(q, handler, &azdispatch.ListenerOptions{
		Codec:   azdispatch.Raw(),
		Scaling: azdispatch.ScalingOptions{ScaleInterval: cfg.Interval},
		// Info: the listener says when it finds the queue paused.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var bg sync.WaitGroup
	bg.Go(func() { readStop(commands, stop) })
	bg.Go(func() { reportListenerStatus(ctx, l, report) })
	runErr := l.Run(ctx)
	stop()
	bg.Wait()
	st := l.State()
	report(queuePauseReport{Kind: pauseWorkerFinal, Final: &queuePauseCounts{Received: st.Received, Succeeded: st.Succeeded, Transactions: st.Transactions}})
	return runErr
}

// pauseStatusEvery is how often a worker looks at its listener's state: the
// grain of the pause's transitions as the coordinator sees them.
const pauseStatusEvery = 20 * time.Millisecond

// reportListenerStatus reports the listener's pause and messages in hand at once,
// then whenever they change, until ctx ends.
func reportListenerStatus(ctx context.Context, l *azdispatch.Listener[string], report func(queuePauseReport)) {
	t := time.NewTicker(pauseStatusEvery)
	defer t.Stop()
	var last queuePauseReport
	for first := true; ; first = false {
		st := l.State()
		_, on := l.Paused()
		now := queuePauseReport{Kind: pauseWorkerStatus, At: time.Now().UnixNano(), InFlight: st.InFlight, Paused: on, Until: st.Paused.Until}
		if first || now.InFlight != last.InFlight || now.Paused != last.Paused || !now.Until.Equal(last.Until) {
			last = now
			report(now)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
