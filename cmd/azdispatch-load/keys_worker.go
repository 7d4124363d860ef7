package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// A keys worker is the load-test binary run again by the keys scenario, in
// a process of its own so that it can be killed: one listener on the
// scenario's queue, with the variant's limits, and storage faults at calm
// rates. It reports every handler call on stdout as it starts and as it
// ends, a JSON line each, written before the handler returns (so that a
// message deleted after its handler is never missing from the record), and
// its listener's State at the end. It stops at "stop" on stdin.
var keysRole = childRole{name: "keys worker", config: "AZDISPATCH_KEYS_WORKER", conn: "AZDISPATCH_KEYS_CONNECTION"}

// keysWorkerConfig is what the coordinator tells a worker.
type keysWorkerConfig struct {
	Queue       string                  `json:"queue"`
	Seed        int64                   `json:"seed"`
	Stream      uint64                  `json:"stream"`
	Limits      azdispatch.LimitOptions `json:"limits"`
	Concurrency int                     `json:"concurrency"`
	Dequeuers   int                     `json:"dequeuers"`
	Hold        time.Duration           `json:"hold"`
	Faults      faultRates              `json:"faults"`
}

// keysReport is one line of a worker's stdout: a handler call's start or
// end (S or E set, Unix nanoseconds), or its final counts.
type keysReport struct {
	Key   string      `json:"k,omitempty"`
	N     int         `json:"n,omitempty"`
	S     int64       `json:"s,omitempty"`
	E     int64       `json:"e,omitempty"`
	Final *keysCounts `json:"final,omitempty"`
}

// keysCounts are what a worker's listener counted, at its end.
type keysCounts struct {
	Succeeded, Snoozed, Poisoned int64
	Transactions                 azdispatch.Transactions
}

// keysVisibility is the workers' visibility timeout: what the messages a
// killed process held wait before another takes them.
const keysVisibility = 10 * time.Second

func runKeysWorker(cfg keysWorkerConfig, cs string, commands io.Reader, status io.Writer) error {
	faults := &faultTransport{next: newHTTPClient(), rng: newLockedRand(cfg.Seed, cfg.Stream), rates: cfg.Faults, spared: "-poison",
		note: func(*http.Request, string, requestOp, string) {}}
	q, store, err := splitKeysAccounts(cs).open(cfg.Queue, faults)
	if err != nil {
		return err
	}
	var outMu sync.Mutex
	out := json.NewEncoder(status)
	report := func(r keysReport) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = out.Encode(r)
	}
	handler := func(ctx context.Context, m *azdispatch.Message[string]) error {
		n, _ := strconv.Atoi(strings.TrimSpace(m.Body))
		report(keysReport{Key: m.Key, N: n, S: time.Now().UnixNano()})
		err := sleepCtx(ctx, cfg.Hold)
		report(keysReport{Key: m.Key, N: n, E: time.Now().UnixNano()})
		return err
	}
	l, err := azdispatch.NewListener(q, handler, &azdispatch.ListenerOptions{
		Codec: azdispatch.Raw(), Concurrency: cfg.Concurrency, Limits: cfg.Limits, VisibilityTimeout: keysVisibility,
		Payloads: azdispatch.PayloadOptions{Store: store},
		Scaling:  azdispatch.ScalingOptions{MinDequeuers: cfg.Dequeuers, MaxDequeuers: cfg.Dequeuers},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var bg sync.WaitGroup
	bg.Go(func() { readStop(commands, stop) })
	runErr := l.Run(ctx)
	stop()
	bg.Wait()
	st := l.State()
	report(keysReport{Final: &keysCounts{Succeeded: st.Succeeded, Snoozed: st.Snoozed, Poisoned: st.Poisoned, Transactions: st.Transactions}})
	return runErr
}
