package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// A schedule worker is the load-test binary run again by the schedule
// scenario, in a process of its own so that it can be killed and paused:
// it runs one Scheduler with the scenario's schedules, sending to the
// queue. It reports on stdout, a JSON line at a time, its account's
// transactions (whenever they changed, every 100 ms), and each claim it
// holds and each send it makes, as they happen, so that the coordinator
// can aim a fault at a process holding a claim. It stops at "stop" on
// stdin, or at its end.
var scheduleRole = childRole{name: "schedule worker", config: "AZDISPATCH_SCHEDULE_WORKER", conn: "AZDISPATCH_SCHEDULE_CONNECTION"}

// scheduleSpec is one schedule of the scenario: fixed intervals only, so
// that the checker knows every occurrence.
type scheduleSpec struct {
	Name   string        `json:"name"`
	Every  time.Duration `json:"every"`
	Jitter time.Duration `json:"jitter"`
}

// scheduleWorkerConfig is what the coordinator tells a worker.
type scheduleWorkerConfig struct {
	Queue        string         `json:"queue"`
	Instance     string         `json:"instance"` // unique per process: a restarted one is a new instance
	Seed         int64          `json:"seed"`
	Stream       uint64         `json:"stream"` // of the seed: one per process
	ClaimTimeout time.Duration  `json:"claim_timeout"`
	Grace        time.Duration  `json:"grace"`
	Schedules    []scheduleSpec `json:"schedules"`
	// Slow is the most each claim waits before its sends (in Messages),
	// and each send before the move on (in OnSent): a process that takes
	// its time, so that a fault aimed at a claim can fall before the send,
	// or between the send and the move on.
	Slow time.Duration `json:"slow"`
}

// scheduleBody is what the schedules send: who sent it, for a run's story.
type scheduleBody struct {
	By string `json:"by"`
}

// scheduleReport is one line of a worker's stdout.
type scheduleReport struct {
	Tx    *azdispatch.Transactions `json:"tx,omitempty"`    // the account's, so far
	Claim string                   `json:"claim,omitempty"` // building the messages of an occurrence of this schedule: claimed
	Sent  string                   `json:"sent,omitempty"`  // the ID of a message just sent, before the move on
	At    time.Time                `json:"at,omitzero"`     // Claim's occurrence
	Final bool                     `json:"final,omitempty"`
}

// scheduleWorker is one worker process's state.
type scheduleWorker struct {
	cfg scheduleWorkerConfig
	rng *lockedRand

	outMu sync.Mutex
	out   *json.Encoder
}

func runScheduleWorker(cfg scheduleWorkerConfig, cs string, commands io.Reader, status io.Writer) error {
	w := &scheduleWorker{cfg: cfg, rng: newLockedRand(cfg.Seed, cfg.Stream), out: json.NewEncoder(status)}
	acct, err := azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{Transport: newHTTPClient()}},
	})
	if err != nil {
		return err
	}
	q, err := acct.Queue(cfg.Queue)
	if err != nil {
		return err
	}
	pub, err := azdispatch.NewPublisher[scheduleBody](q, &azdispatch.PublisherOptions{OnSent: w.sent})
	if err != nil {
		return err
	}
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{
		Instance: cfg.Instance, ClaimTimeout: cfg.ClaimTimeout, Grace: cfg.Grace,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	for _, sp := range cfg.Schedules {
		if err := s.Add(azdispatch.Schedule[scheduleBody]{Name: sp.Name, Every: sp.Every, Jitter: sp.Jitter, Messages: w.messages}); err != nil {
			return err
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var bg sync.WaitGroup
	bg.Go(func() { readStop(commands, stop) })
	bg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var last azdispatch.Transactions
		for first := true; ; first = false {
			if tx := acct.Transactions(); first || tx != last {
				last = tx
				w.report(scheduleReport{Tx: &tx})
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	runErr := s.Run(ctx)
	stop()
	bg.Wait()
	tx := acct.Transactions()
	w.report(scheduleReport{Tx: &tx, Final: true})
	return runErr
}

// readStop calls stop at a "stop" line or at the end of r (the coordinator
// closes stdin after stop, and it ends with the coordinator).
func readStop(r io.Reader, stop func()) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "stop" {
			break
		}
	}
	stop()
}

// messages is every schedule's Messages: called once the occurrence is
// claimed, it says so, takes its time, and returns one body.
func (w *scheduleWorker) messages(ctx context.Context, o azdispatch.Occurrence) ([]scheduleBody, error) {
	w.report(scheduleReport{Claim: o.Schedule, At: o.At})
	if err := sleepCtx(ctx, w.rng.between(0, w.cfg.Slow)); err != nil {
		return nil, err
	}
	return []scheduleBody{{By: w.cfg.Instance}}, nil
}

// sent is the publisher's OnSent: it says so, and takes its time before
// the scheduler moves the schedule's record on. (OnSent is not to block;
// a few milliseconds stand for a slow process.)
func (w *scheduleWorker) sent(_ context.Context, id string) {
	w.report(scheduleReport{Sent: id})
	time.Sleep(w.rng.between(0, w.cfg.Slow))
}

// report writes one line.
func (w *scheduleWorker) report(r scheduleReport) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	_ = w.out.Encode(r)
}
