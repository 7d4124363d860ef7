package main

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"

	"github.com/azdispatch/azdispatch"
)

// A chaos worker is the load-test binary run again by the chaos scenario,
// in a process of its own so that it can be killed: it runs one Listener
// on the queue, through a fault-injecting transport, and records in a file
// every message its handler handled and every delete that succeeded, each
// with one write() before going on, so that the record survives a SIGKILL
// (the operating system keeps what was written). It takes commands on
// stdin (a fault mode, or stop) and reports its State on stdout.
var chaosRole = childRole{name: "chaos worker", config: "AZDISPATCH_CHAOS_WORKER", conn: "AZDISPATCH_CHAOS_CONNECTION"}

// chaosWorkerConfig is what the coordinator tells a worker.
type chaosWorkerConfig struct {
	Queue       string        `json:"queue"`
	Log         string        `json:"log"` // the record file, one per incarnation
	Worker      int           `json:"worker"`
	Incarnation int           `json:"incarnation"`
	Seed        int64         `json:"seed"`
	Mode        string        `json:"mode"`
	Rates       faultRates    `json:"rates"`
	Visibility  time.Duration `json:"visibility"`
	TryTimeout  time.Duration `json:"try_timeout"`
	MaxDequeue  int64         `json:"max_dequeue_count"`
	LongShare   float64       `json:"long_share"` // of handler calls, the long ones, which renew
	Short       [2]time.Duration
	Long        [2]time.Duration
	IdleClose   [2]time.Duration // how often to drop idle connections, so new ones (some hanging) are opened
}

// workerStatus is a worker's report, one JSON line on stdout.
type workerStatus struct {
	Mode         string           `json:"mode"`
	Final        bool             `json:"final,omitempty"`
	StormPending int              `json:"storm_pending"` // messages whose delete the storm refused, not deleted since
	StormMaxDC   int64            `json:"storm_max_dc"`  // highest dequeue count seen in this storm for one of them
	Faults       map[string]int64 `json:"faults"`
	State        stateTotals      `json:"state"`
}

// stateTotals are the State counters the chaos record sums over workers.
type stateTotals struct {
	Received      int64 `json:"received"`
	Succeeded     int64 `json:"succeeded"`
	HandledBefore int64 `json:"handled_before"`
	Lost          int64 `json:"lost"`
	Retried       int64 `json:"retried"`
	Poisoned      int64 `json:"poisoned"`
	Released      int64 `json:"released"`
	ReceiveErrors int64 `json:"receive_errors"`
}

func totalsOf(s azdispatch.State) stateTotals {
	return stateTotals{Received: s.Received, Succeeded: s.Succeeded, HandledBefore: s.HandledBefore, Lost: s.Lost,
		Retried: s.Retried, Poisoned: s.Poisoned, Released: s.Released, ReceiveErrors: s.ReceiveErrors}
}

func (t *stateTotals) add(o stateTotals) {
	t.Received += o.Received
	t.Succeeded += o.Succeeded
	t.HandledBefore += o.HandledBefore
	t.Lost += o.Lost
	t.Retried += o.Retried
	t.Poisoned += o.Poisoned
	t.Released += o.Released
	t.ReceiveErrors += o.ReceiveErrors
}

// Record lines of a worker's file.
const (
	recHandled = "H" // H <seq> <message id> <dequeue count> <time>: the handler finished it
	recDeleted = "D" // D <message id> <time>: a delete of it succeeded
	recFailed  = "X" // X <message id> <time>: a delete of it failed, after the SDK's retries
	recFault   = "F" // F <kind> <message id or -> <time>: a fault injected
)

// durableLog appends lines to a file, each with one write() and no
// buffering: once the call returns, the line outlives the process.
type durableLog struct {
	mu sync.Mutex
	f  *os.File
}

func (d *durableLog) line(fields ...any) error {
	// Each line ends with its time (Unix milliseconds), for reading a
	// run's story; the checker does not need it.
	s := fmt.Sprintln(append(fields, time.Now().UnixMilli())...)
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.f.WriteString(s)
	return err
}

// chaosWorker is one worker process's state.
type chaosWorker struct {
	cfg    chaosWorkerConfig
	rec    *durableLog
	rng    *lockedRand
	faults *faultTransport

	mu         sync.Mutex
	counts     map[string]int64
	inStorm    bool                // from storm-target until calm: failed deletes are remembered
	pending    map[string]struct{} // of those, the ones not deleted since
	stormMaxDC int64

	outMu sync.Mutex
	out   *json.Encoder
}

func runChaosWorker(cfg chaosWorkerConfig, cs string, commands io.Reader, status io.Writer) error {
	f, err := os.OpenFile(filepath.Clean(cfg.Log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &chaosWorker{
		cfg: cfg, rec: &durableLog{f: f},
		// One stream per worker and incarnation, so that a seed replays
		// each process's own sequence of draws.
		rng:     newLockedRand(cfg.Seed, uint64(1000+cfg.Worker*1000+cfg.Incarnation)),
		counts:  map[string]int64{},
		pending: map[string]struct{}{},
		out:     json.NewEncoder(status),
	}
	client := newHTTPClient()
	w.faults = &faultTransport{next: client, rng: w.rng, rates: cfg.Rates, spared: cfg.Queue + "-poison",
		note: w.noteFault, received: w.received}
	w.setMode(cfg.Mode)
	acct, err := azdispatch.NewAccountFromConnectionString(cs, &azdispatch.AccountOptions{
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: w.faults,
			// A hung connection costs TryTimeout, not the default 30 s; a
			// delete refused four times gives up in about 2 s, within the
			// visibility timeout.
			Retry:           policy.RetryOptions{MaxRetries: 3, TryTimeout: cfg.TryTimeout, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second},
			PerCallPolicies: []policy.Policy{ackPolicy{w: w}},
		}},
	})
	if err != nil {
		return err
	}
	q, err := acct.Queue(cfg.Queue)
	if err != nil {
		return err
	}
	l, err := azdispatch.NewListener(q, w.handle, &azdispatch.ListenerOptions{
		VisibilityTimeout: cfg.Visibility,
		MaxDequeueCount:   cfg.MaxDequeue,
		Scaling: azdispatch.ScalingOptions{
			MaxDequeuers: 4,
			Idle:         azdispatch.ExponentialIdle(0, time.Second),
		},
		DrainTimeout: 10 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var bg sync.WaitGroup
	// Commands end at stop or at the end of stdin (the coordinator closes
	// it after stop, and it ends with the coordinator).
	bg.Go(func() { w.readCommands(commands, stop) })
	bg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.report(l.State(), false)
			}
		}
	})
	bg.Go(func() {
		for {
			t := time.NewTimer(w.rng.between(cfg.IdleClose[0], cfg.IdleClose[1]))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				if faultMode(w.faults.mode.Load()) == modeCalm {
					client.CloseIdleConnections()
				}
			}
		}
	})
	runErr := l.Run(ctx)
	w.report(l.State(), true)
	stop()
	bg.Wait()
	return runErr
}

// readCommands applies "mode <name>" lines and calls stop at "stop" or at
// the end of r.
func (w *chaosWorker) readCommands(r io.Reader, stop func()) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch cmd {
		case "mode":
			w.setMode(arg)
		case "stop":
			stop()
		}
	}
	stop()
}

// setMode switches the transport. A storm's target starts remembering its
// failed deletes, and forgets the last storm's figures.
func (w *chaosWorker) setMode(name string) {
	m, ok := modeNames[name]
	if !ok {
		return
	}
	w.mu.Lock()
	switch m {
	case modeStormTarget:
		w.inStorm, w.stormMaxDC = true, 0
		clear(w.pending)
	case modeCalm:
		w.inStorm = false
	}
	w.mu.Unlock()
	w.faults.setMode(m)
}

// handle is the handler: it takes a little time (sometimes long enough to
// be renewed), never fails, and records the message durably before
// returning nil. A try whose context ends first (its ownership lost, the
// drain) has handled nothing and says so.
func (w *chaosWorker) handle(ctx context.Context, m *azdispatch.Message[payload]) error {
	d := w.rng.between(w.cfg.Short[0], w.cfg.Short[1])
	if w.rng.chance(w.cfg.LongShare) {
		d = w.rng.between(w.cfg.Long[0], w.cfg.Long[1])
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	return w.rec.line(recHandled, m.Body.Seq, m.ID, m.DequeueCount)
}

// noteFault records a fault the transport injected.
func (w *chaosWorker) noteFault(_ *http.Request, kind string, _ requestOp, id string) {
	if id == "" {
		id = "-"
	}
	_ = w.rec.line(recFault, kind, id)
	w.mu.Lock()
	w.counts[kind]++
	w.mu.Unlock()
}

// deleted records the outcome of a delete call, after the SDK's retries:
// ok, or failed leaving the message on the queue (refused, timed out), or
// failed because it is gone or received again since (404, 400: a stale pop
// receipt). During a storm only the target receives, so a message received
// again is in its hands under another delivery, which is followed instead.
func (w *chaosWorker) deleted(id string, ok, left bool) {
	if ok {
		_ = w.rec.line(recDeleted, id)
	} else {
		_ = w.rec.line(recFailed, id)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case ok:
		delete(w.pending, id)
	case w.inStorm && left:
		w.pending[id] = struct{}{}
	}
}

// received notes the dequeue counts at which messages whose delete the
// storm refused come back.
func (w *chaosWorker) received(body []byte) {
	var list struct {
		Messages []struct {
			ID           string `xml:"MessageId"`
			DequeueCount int64  `xml:"DequeueCount"`
		} `xml:"QueueMessage"`
	}
	if xml.Unmarshal(body, &list) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range list.Messages {
		if _, ok := w.pending[m.ID]; ok {
			w.stormMaxDC = max(w.stormMaxDC, m.DequeueCount)
		}
	}
}

// report writes one status line.
func (w *chaosWorker) report(s azdispatch.State, final bool) {
	w.mu.Lock()
	st := workerStatus{
		Mode: faultMode(w.faults.mode.Load()).String(), Final: final,
		StormPending: len(w.pending), StormMaxDC: w.stormMaxDC,
		Faults: make(map[string]int64, len(w.counts)), State: totalsOf(s),
	}
	for k, v := range w.counts {
		st.Faults[k] = v
	}
	w.mu.Unlock()
	w.outMu.Lock()
	defer w.outMu.Unlock()
	_ = w.out.Encode(st)
}

// ackPolicy sees each delete call once, around the SDK's retries, and
// records whether it succeeded in the end: a handled message whose delete
// never succeeded in its process is an acknowledgement lost, which may
// cost one more handling elsewhere.
type ackPolicy struct{ w *chaosWorker }

func (a ackPolicy) Do(req *policy.Request) (*http.Response, error) {
	op, _, id := classify(req.Raw())
	if op != opDelete {
		return req.Next()
	}
	resp, err := req.Next()
	ok := err == nil && resp.StatusCode/100 == 2
	left := err != nil || (resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest)
	a.w.deleted(id, ok, left)
	return resp, err
}
