package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// chaosRun is one chaos run, as its coordinator sees it.
type chaosRun struct {
	cfg      chaosConfig
	seed     int64
	rng      *lockedRand // the schedule: kills, storms and their targets
	progress io.Writer
	logMu    sync.Mutex // the run and its monitor both log to progress
	exe      string

	dir      string
	queue    string
	workerCS string // through the proxy; holds the key: never printed
	proxy    *hangProxy
	q        *azdispatch.Queue // straight to the emulator, no faults: depth and the poison queue
	events   *durableLog       // the run's events and the publishers' faults, for replaying a seed
	begin    time.Time

	procs []*workerProc  // the running incarnation of each worker (the chaos loop's)
	wg    sync.WaitGroup // the workers' stdout readers

	mu            sync.Mutex // guards all, kills and storms, which the monitor reads too
	all           []*workerProc
	kills, storms int

	stormsPast int
	stormMaxDC int64

	depthMu  sync.Mutex
	maxDepth int
}

// run sets up, injects for the configured duration, drains and judges.
func (r *chaosRun) run(ctx context.Context) (chaosRecord, error) {
	acct, err := openAccount(ctx, false)
	if err != nil {
		return chaosRecord{}, err
	}
	defer acct.close()
	if r.dir, err = os.MkdirTemp("", "azdispatch-chaos-"); err != nil {
		return chaosRecord{}, err
	}
	keep := true // the records are kept when the run fails, for a look (runChaos says where)
	defer func() {
		if !keep {
			_ = os.RemoveAll(r.dir)
		}
	}()
	ev, err := os.Create(filepath.Join(r.dir, "chaos-events.log"))
	if err != nil {
		return chaosRecord{}, err
	}
	defer ev.Close()
	r.events = &durableLog{f: ev}

	endpoint, err := url.Parse(acct.emulator.QueueEndpoint())
	if err != nil {
		return chaosRecord{}, err
	}
	if r.proxy, err = startHangProxy(endpoint.Host, newLockedRand(r.seed, 1), r.cfg.HangRate); err != nil {
		return chaosRecord{}, err
	}
	defer r.proxy.close()
	proxied := *endpoint
	proxied.Host = r.proxy.addr()
	r.workerCS = withQueueEndpoint(acct.connectionString, proxied.String())

	r.queue = queueName("chaos")
	if r.q, err = openQueue(acct.connectionString, r.queue, 0); err != nil {
		return chaosRecord{}, err
	}
	if err := r.q.Create(ctx); err != nil {
		return chaosRecord{}, err
	}
	defer r.wg.Wait()
	defer func() { killRunning(r.procs) }() // on an early return; a no-op after the workers stopped
	for i := range r.cfg.Workers {
		p, err := r.start(i, 1, modeCalm)
		if err != nil {
			return chaosRecord{}, err
		}
		r.procs = append(r.procs, p)
	}
	if err := awaitReports(ctx, r.procs); err != nil {
		return chaosRecord{}, err
	}
	pub, err := startPublishers(ctx, acct.connectionString, r.queue, r.cfg.Rate, r.cfg.Publishers, r.cfg.Publisher, newLockedRand(r.seed, 2), r.events)
	if err != nil {
		return chaosRecord{}, err
	}
	r.proxy.setHanging(true)

	r.begin = time.Now()
	monCtx, stopMonitor := context.WithCancel(ctx)
	var mon sync.WaitGroup
	mon.Go(func() { r.monitor(monCtx, pub) })
	chaosErr := r.chaos(ctx, r.begin.Add(r.cfg.Duration))
	injected := time.Since(r.begin)

	// Stop injecting, stop sending, and let the queue drain.
	r.proxy.setHanging(false)
	for _, p := range r.procs {
		p.command("mode quiet")
	}
	pub.halt()
	r.logf("injection stopped after %.0f s; draining", injected.Seconds())
	drainStart := time.Now()
	drainErr := r.drain(ctx)
	drained := time.Since(drainStart)
	stopMonitor()
	mon.Wait()
	stopErr := r.stopWorkers()
	if err := errors.Join(chaosErr, stopErr); err != nil {
		return chaosRecord{}, err
	}
	if drainErr != nil {
		fmt.Fprintf(r.progress, "chaos: %v; what is left counts as lost\n", drainErr)
	}
	poisoned, err := r.readPoison(ctx)
	if err != nil {
		return chaosRecord{}, err
	}
	rec, err := r.judge(pub, poisoned)
	if err != nil {
		return chaosRecord{}, err
	}
	rec.DurationS, rec.DrainS = injected.Seconds(), drained.Seconds()
	keep = !rec.OK
	return rec, nil
}

// withQueueEndpoint replaces a connection string's QueueEndpoint.
func withQueueEndpoint(cs, endpoint string) string {
	var parts []string
	for _, part := range strings.Split(cs, ";") {
		if k, _, _ := strings.Cut(part, "="); part != "" && !strings.EqualFold(k, "QueueEndpoint") {
			parts = append(parts, part)
		}
	}
	return strings.Join(append(parts, "QueueEndpoint="+endpoint), ";")
}

// logf prints a progress line and keeps it among the run's events.
func (r *chaosRun) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	at := 0.0
	if !r.begin.IsZero() {
		at = time.Since(r.begin).Seconds()
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.progress, "chaos %5.0fs: %s\n", at, s)
	_ = r.events.line(fmt.Sprintf("%.3f", at), s)
}

// chaos injects the scheduled faults until end: kills, and storms, one at
// a time, so that no worker is down during a storm and no kill falls in one.
func (r *chaosRun) chaos(ctx context.Context, end time.Time) error {
	nextKill := time.Now().Add(r.rng.between(r.cfg.KillEvery[0], r.cfg.KillEvery[1]))
	nextStorm := time.Now().Add(r.rng.between(r.cfg.StormGap[0], r.cfg.StormGap[1]))
	for {
		next, storm := nextKill, false
		if nextStorm.Before(nextKill) && end.Sub(nextStorm) >= r.cfg.StormLead {
			next, storm = nextStorm, true
		}
		if !next.Before(end) {
			return sleepCtx(ctx, time.Until(end))
		}
		if err := sleepCtx(ctx, time.Until(next)); err != nil {
			return err
		}
		if storm {
			if err := r.storm(ctx); err != nil {
				return err
			}
			now := time.Now()
			nextStorm = now.Add(r.rng.between(r.cfg.StormGap[0], r.cfg.StormGap[1]))
			if nextKill.Before(now) {
				nextKill = now.Add(r.rng.between(time.Second, r.cfg.KillEvery[0]))
			}
			continue
		}
		if err := r.killOne(ctx); err != nil {
			return err
		}
		nextKill = time.Now().Add(r.rng.between(r.cfg.KillEvery[0], r.cfg.KillEvery[1]))
	}
}

// killOne kills a worker at random with SIGKILL (TerminateProcess on
// Windows) and starts it again after a short pause.
func (r *chaosRun) killOne(ctx context.Context) error {
	i := r.rng.intN(len(r.procs))
	p := r.procs[i]
	p.kill()
	r.mu.Lock()
	r.kills++
	n := r.kills
	r.mu.Unlock()
	r.logf("kill %d: worker %d (process %d of it) killed", n, i, p.number)
	if err := sleepCtx(ctx, r.rng.between(r.cfg.RestartAfter[0], r.cfg.RestartAfter[1])); err != nil {
		return err
	}
	np, err := r.start(i, p.number+1, modeCalm)
	if err != nil {
		return err
	}
	r.procs[i] = np
	return nil
}

// storm refuses every delete of one worker, and every receive of the
// others, until a message the target handled has come back to it past
// MaxDequeueCount (or StormCap passes); then lets the target delete again,
// and the others receive again only once it has deleted every message it
// failed to (or GraceCap passes). No other fault is injected meanwhile.
func (r *chaosRun) storm(ctx context.Context) error {
	t := r.rng.intN(len(r.procs))
	target := r.procs[t]
	r.proxy.setHanging(false)
	for i, p := range r.procs {
		if i == t {
			p.command("mode storm-target")
		} else {
			p.command("mode storm-refused")
		}
	}
	r.mu.Lock()
	r.storms++
	n := r.storms
	r.mu.Unlock()
	begin := time.Now()
	var maxDC int64
	for {
		if st := target.lastStatus(); st.Mode == modeStormTarget.String() {
			maxDC = st.StormMaxDC
		}
		since := time.Since(begin)
		if (maxDC > r.cfg.MaxDequeue && since >= r.cfg.StormMin) || since >= r.cfg.StormCap {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	stormLen := time.Since(begin)
	target.command("mode quiet")
	graceStart := time.Now()
	pending := -1
	for time.Since(graceStart) < r.cfg.GraceCap {
		if st := target.lastStatus(); st.Mode == modeQuiet.String() {
			pending = st.StormPending
			if pending == 0 && time.Since(graceStart) >= time.Second {
				break
			}
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	for _, p := range r.procs {
		p.command("mode calm")
	}
	r.proxy.setHanging(true)
	r.stormMaxDC = max(r.stormMaxDC, maxDC)
	if maxDC > r.cfg.MaxDequeue {
		r.stormsPast++
	}
	left := "all deleted"
	if pending != 0 {
		// A delete that timed out may have reached the emulator after all:
		// such a message is gone, and never comes back to be deleted.
		left = fmt.Sprintf("%d not seen deleted", max(pending, 0))
	}
	r.logf("storm %d: worker %d's deletes refused for %.0f s, the others' receives too; its handled messages came back up to dequeue count %d; %s %.1f s later",
		n, t, stormLen.Seconds(), maxDC, left, time.Since(graceStart).Seconds())
	return nil
}

// monitor samples the queue's depth and prints progress now and then.
func (r *chaosRun) monitor(ctx context.Context, pub *chaosPublishers) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		depth, err := r.q.Depth(ctx)
		if err != nil {
			continue
		}
		r.depthMu.Lock()
		r.maxDepth = max(r.maxDepth, depth)
		r.depthMu.Unlock()
		if n%6 == 0 {
			ok, ind := pub.sentSoFar()
			r.mu.Lock()
			kills, storms := r.kills, r.storms
			r.mu.Unlock()
			r.logf("sent %d (+%d indeterminate), held %d, kills %d, storms %d", ok, ind, depth, kills, storms)
		}
	}
}

// drain waits until the queue is empty.
func (r *chaosRun) drain(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.Drain)
	for {
		depth, err := r.q.Depth(ctx)
		if err == nil && depth == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queue still held %d messages after %v", depth, r.cfg.Drain)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// readPoison returns the sequence numbers of the messages in the poison
// queue (-1 for one that is not a chaos message).
func (r *chaosRun) readPoison(ctx context.Context) ([]int, error) {
	pq := r.q.PoisonQueue()
	var seqs []int
	for {
		ds, err := pq.Receive(ctx, azdispatch.MaxBatch, 10*time.Minute)
		var se *azdispatch.StorageError
		if errors.As(err, &se) && se.Code == "QueueNotFound" {
			return seqs, nil // never created: nothing was poisoned
		}
		if err != nil {
			return nil, err
		}
		if len(ds) == 0 {
			return seqs, nil
		}
		for _, d := range ds {
			seq := -1
			if env, err := azdispatch.ParsePoison(d.Text); err == nil {
				var p payload
				if json.Unmarshal([]byte(env.Body), &p) == nil {
					seq = p.Seq
				}
				r.logf("poisoned: message %d (%s), dequeue count %d: %s", seq, env.MessageID, env.DequeueCount, env.Reason)
			}
			seqs = append(seqs, seq)
		}
	}
}

// judge reads every worker's records and checks the run.
func (r *chaosRun) judge(pub *chaosPublishers, poisoned []int) (chaosRecord, error) {
	sends, pubFaults := pub.results()
	r.mu.Lock()
	defer r.mu.Unlock()
	var incs []incarnation
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var state stateTotals
	for _, p := range r.all {
		f, err := os.Open(p.log)
		if err != nil {
			return chaosRecord{}, err
		}
		files = append(files, f)
		st := p.lastStatus()
		state.add(st.State)
		incs = append(incs, incarnation{worker: p.worker, number: p.number, killed: p.wasKilled(), status: st, records: f})
	}
	v, err := check(sends, incs, poisoned)
	if err != nil {
		return chaosRecord{}, err
	}
	faults := map[string]int{}
	for _, k := range faultKinds {
		faults[k] = v.Faults[k] + pubFaults[k]
	}
	faults[faultHang] = int(r.proxy.hangs.Load())
	faults[faultKill] = r.kills
	faults[faultStorm] = r.storms
	if v.Malformed > 0 {
		fmt.Fprintf(r.progress, "chaos: %d record lines could not be read\n", v.Malformed)
	}
	r.depthMu.Lock()
	maxDepth := r.maxDepth
	r.depthMu.Unlock()
	return chaosRecord{
		Scenario: "chaos", Seed: r.seed, Workers: r.cfg.Workers, RatePerS: r.cfg.Rate,
		Sent: v.Sent, Handled: v.Handled, Lost: v.Lost, Unexpected: v.Unexpected,
		Indeterminate: v.Indeterminate, Recovered: v.Recovered, Refused: v.Refused,
		Duplicated: v.Duplicated, DuplicateHandlings: v.DuplicateHandlings,
		DuplicateBound: v.bound(), BoundHeld: v.boundHeld(), KillInFlight: v.KillInFlight, LostAcks: v.LostAcks, LostAcksUnsent: v.LostAcksUnsent,
		WronglyPoisoned: v.WronglyPoisoned, Faults: faults, Storm503: v.Faults[faultStorm503],
		StormMaxDequeueCount: r.stormMaxDC, StormsPastMax: r.stormsPast,
		State: state, Incarnations: len(r.all), MaxDepth: maxDepth, OK: v.ok() && v.Malformed == 0,
	}, nil
}

// sleepCtx sleeps for d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
