package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
)

// scheduleRun is one schedule run, as its coordinator sees it.
type scheduleRun struct {
	cfg      scheduleConfig
	seed     int64
	rng      *lockedRand // the faults: when, which kind, aimed or not, on whom
	progress io.Writer
	exe      string

	dir    string
	cs     string // holds the key: never printed
	queue  string
	events *durableLog // the run's story: faults, claims, handlings
	born   time.Time   // when the run started: progress lines count from it
	logMu  sync.Mutex  // progress lines come from the listener's goroutines too

	wg       sync.WaitGroup  // the workers' stdout readers
	activity chan procEvent  // claims and sends, for aimed faults
	procs    []*scheduleProc // the running process of each slot (the chaos loop's)
	end      time.Time       // of the faults (the chaos loop's)
	paused   *scheduleProc   // the one stopped now, if any (the chaos loop's)
	resumeAt time.Time       // when it is to run again
	lastAim  time.Time       // when the last aimed fault fell
	l        *azdispatch.Listener[scheduleBody]

	mu                 sync.Mutex // guards all, handled and the counts
	all                []*scheduleProc
	handled            []handling
	kills, pauses      int
	killsAim, pauseAim int

	verdict scheduleVerdict
}

// scheduleProc is one scheduler process: a slot's incarnation.
type scheduleProc struct {
	*child
	slot, number int
	instance     string

	mu    sync.Mutex
	tx    azdispatch.Transactions // as last reported
	heard bool
}

// procEvent is a worker's report of a claim or a send, when it was read.
type procEvent struct {
	p    *scheduleProc
	what string // "claim" or "sent"
	seen time.Time
}

// run sets up, makes faults for the configured duration, lets the last
// occurrences be handled, and judges.
func (r *scheduleRun) run(ctx context.Context) (scheduleRecord, error) {
	acct, err := openAccount(ctx, false)
	if err != nil {
		return scheduleRecord{}, err
	}
	defer acct.close()
	if r.dir, err = os.MkdirTemp("", "azdispatch-schedule-"); err != nil {
		return scheduleRecord{}, err
	}
	keep := true // the records are kept when the run fails, for a look (runSchedule says where)
	defer func() {
		if !keep {
			_ = os.RemoveAll(r.dir)
		}
	}()
	ev, err := os.Create(filepath.Join(r.dir, "schedule-events.log"))
	if err != nil {
		return scheduleRecord{}, err
	}
	defer ev.Close()
	r.events = &durableLog{f: ev}
	r.cs = acct.connectionString
	r.activity = make(chan procEvent, 64)

	r.queue = queueName("schedule")
	q, err := openQueue(r.cs, r.queue, 0)
	if err != nil {
		return scheduleRecord{}, err
	}
	if err := q.Create(ctx); err != nil {
		return scheduleRecord{}, err
	}
	stopListener, err := r.listen(ctx, q)
	if err != nil {
		return scheduleRecord{}, err
	}
	listening := true
	defer func() {
		if listening {
			_ = stopListener()
		}
	}()

	defer r.wg.Wait()
	defer func() { killRunning(r.procs) }() // on an early return; a no-op after the workers stopped
	for i := range r.cfg.Schedulers {
		p, err := r.start(i, 1)
		if err != nil {
			return scheduleRecord{}, err
		}
		r.procs = append(r.procs, p)
	}
	if err := awaitReports(ctx, r.procs); err != nil {
		return scheduleRecord{}, err
	}

	begin := time.Now()
	r.logf("%d schedulers running; faults begin", r.cfg.Schedulers)
	from, to := begin.Add(r.cfg.Warmup), begin.Add(r.cfg.Duration)
	var atFrom, atTo requestCounts
	var sampler sync.WaitGroup
	sampler.Go(func() {
		if sleepCtx(ctx, time.Until(from)) == nil {
			atFrom = r.requests()
		}
		if sleepCtx(ctx, time.Until(to)) == nil {
			atTo = r.requests()
		}
	})
	chaosErr := r.chaos(ctx, to)
	if r.paused != nil {
		r.resume()
	}
	sampler.Wait()
	if chaosErr != nil {
		return scheduleRecord{}, chaosErr
	}
	// Every occurrence of the window is due to be handled within the bound.
	r.logf("faults stopped; waiting %.0f s for the window's last occurrences", r.cfg.lateBound().Seconds()+1)
	if err := sleepCtx(ctx, r.cfg.lateBound()+time.Second); err != nil {
		return scheduleRecord{}, err
	}
	states, statesErr := r.states(ctx, q)
	stopErr := r.stopWorkers()
	drainErr := r.drain(ctx, q)
	listening = false
	if err := errors.Join(stopListener(), stopErr, statesErr); err != nil {
		return scheduleRecord{}, err
	}
	if drainErr != nil {
		fmt.Fprintf(r.progress, "schedule: %v\n", drainErr)
	}
	rec := r.judge(from, to, atFrom, atTo, states)
	keep = !rec.OK
	return rec, nil
}

// listen starts the one listener, whose handler records every occurrence
// it is given; the returned stop ends it and returns Run's result.
func (r *scheduleRun) listen(ctx context.Context, q *azdispatch.Queue) (stop func() error, err error) {
	logFile, err := os.Create(filepath.Join(r.dir, "listener.log"))
	if err != nil {
		return nil, err
	}
	l, err := azdispatch.NewListener(q, r.handle, &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, r.cfg.ListenerIdle),
		},
		Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		logFile.Close()
		return nil, err
	}
	r.l = l
	stopRun := runListener(ctx, l)
	return func() error {
		err := stopRun()
		logFile.Close()
		return err
	}, nil
}

// handle is the listener's handler: it records the occurrence, and never
// fails.
func (r *scheduleRun) handle(_ context.Context, m *azdispatch.Message[scheduleBody]) error {
	received := time.Now()
	if m.Occurrence == nil {
		r.logf("message %s carries no occurrence", m.ID)
		return nil
	}
	o := m.Occurrence
	h := handling{Schedule: o.Schedule, At: o.At, Item: o.Item, Late: o.Late, Missed: o.Missed,
		Received: received, ID: m.ID, DequeueCount: m.DequeueCount, By: m.Body.By}
	if b, err := json.Marshal(h); err == nil {
		_ = r.events.line("handled", string(b))
	}
	r.mu.Lock()
	r.handled = append(r.handled, h)
	r.mu.Unlock()
	return nil
}

// start runs incarnation number of slot.
func (r *scheduleRun) start(slot, number int) (*scheduleProc, error) {
	p := &scheduleProc{slot: slot, number: number, instance: fmt.Sprintf("sched%d-%d", slot, number)}
	env, err := scheduleRole.env(scheduleWorkerConfig{
		Queue: r.queue, Instance: p.instance, Seed: r.seed, Stream: uint64(1000 + slot*1000 + number),
		ClaimTimeout: r.cfg.ClaimTimeout, Grace: r.cfg.Grace, Schedules: r.cfg.Schedules, Slow: r.cfg.Slow,
	}, r.cs)
	if err != nil {
		return nil, err
	}
	c, err := startChild(r.exe, env, filepath.Join(r.dir, p.instance+".stderr"), &r.wg, func(line []byte) { r.reported(p, line) })
	if err != nil {
		return nil, fmt.Errorf("scheduler %d: %w", slot, err)
	}
	p.child = c
	r.mu.Lock()
	r.all = append(r.all, p)
	r.mu.Unlock()
	return p, nil
}

// reported takes one line of a worker's stdout.
func (r *scheduleRun) reported(p *scheduleProc, line []byte) {
	var rep scheduleReport
	if json.Unmarshal(line, &rep) != nil {
		return
	}
	seen := time.Now()
	if rep.Tx != nil {
		p.mu.Lock()
		p.tx, p.heard = *rep.Tx, true
		p.mu.Unlock()
	}
	what := ""
	switch {
	case rep.Claim != "":
		what = "claim"
		_ = r.events.line("claim", p.instance, rep.Claim, rep.At.Format(time.TimeOnly))
	case rep.Sent != "":
		what = "sent"
		_ = r.events.line("sent", p.instance, rep.Sent)
	default:
		return
	}
	select {
	case r.activity <- procEvent{p: p, what: what, seen: seen}:
	default: // the chaos loop is busy: this one is not aimed at
	}
}

func (p *scheduleProc) lastTx() (azdispatch.Transactions, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tx, p.heard
}

// stopWorkers stops every scheduler, and checks that each process of them
// ended well (see stopChildren).
func (r *scheduleRun) stopWorkers() error {
	r.mu.Lock()
	all := append([]*scheduleProc(nil), r.all...)
	r.mu.Unlock()
	return stopChildren(r.procs, all, 30*time.Second)
}

func (p *scheduleProc) hasReported() bool {
	_, ok := p.lastTx()
	return ok
}

func (p *scheduleProc) slotName() string { return fmt.Sprintf("scheduler %d", p.slot) }

func (p *scheduleProc) procName() string { return "scheduler " + p.instance }

// drain waits, for a while, until the queue is empty and the listener has
// nothing in hand.
func (r *scheduleRun) drain(ctx context.Context, q *azdispatch.Queue) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		depth, err := q.Depth(ctx)
		if err == nil && depth == 0 && r.l.State().InFlight == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queue still held %d messages after 30 s", depth)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// states reads the schedules' records, through a Scheduler that is not
// run.
func (r *scheduleRun) states(ctx context.Context, q *azdispatch.Queue) ([]azdispatch.ScheduleState, error) {
	pub, err := azdispatch.NewPublisher[scheduleBody](q, nil)
	if err != nil {
		return nil, err
	}
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "coordinator", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	for _, sp := range r.cfg.Schedules {
		if err := s.Add(azdispatch.Schedule[scheduleBody]{Name: sp.Name, Every: sp.Every, Jitter: sp.Jitter,
			Messages: func(context.Context, azdispatch.Occurrence) ([]scheduleBody, error) { return nil, nil }}); err != nil {
			return nil, err
		}
	}
	return s.States(ctx)
}

// requestCounts are the requests made so far by the schedulers and by the
// listener's marks of delivered occurrences.
type requestCounts struct{ schedulers, marks int64 }

// requests sums every scheduler process's transactions, as last reported
// (a killed one's last report may miss its last 100 ms), and the
// listener's blob requests: its marks, and its reads of them for
// duplicates.
func (r *scheduleRun) requests() requestCounts {
	r.mu.Lock()
	all := append([]*scheduleProc(nil), r.all...)
	r.mu.Unlock()
	var c requestCounts
	for _, p := range all {
		tx, _ := p.lastTx()
		c.schedulers += tx.Total()
	}
	c.marks = r.l.State().Transactions.Blob()
	return c
}

// judge counts the window's occurrences and makes the record.
func (r *scheduleRun) judge(from, to time.Time, atFrom, atTo requestCounts, states []azdispatch.ScheduleState) scheduleRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	bound := r.cfg.lateBound()
	v := judgeSchedules(r.handled, r.cfg.Schedules, from, to, bound, r.cfg.ClaimTimeout/2)
	r.verdict = v
	rec := scheduleRecord{
		Scenario: "schedule", Seed: r.seed, DurationS: r.cfg.Duration.Seconds(), WindowS: to.Sub(from).Seconds(),
		Schedulers: r.cfg.Schedulers, ClaimS: r.cfg.ClaimTimeout.Seconds(), GraceS: r.cfg.Grace.Seconds(),
		Occurrences: v.Expected, Handled: v.Handled, Missing: v.Missing, Duplicated: v.Duplicated, Late: v.Late,
		Skipped: v.Skipped, Unexpected: v.Unexpected, LateFlagged: v.LateFlagged, Delayed: v.Delayed,
		LateBoundS: bound.Seconds(), MaxLateS: v.MaxLate.Seconds(),
		Kills: r.kills, KillsAimed: r.killsAim, Pauses: r.pauses, PausesAimed: r.pauseAim, Processes: len(r.all),
		DuplicatesDropped: r.l.State().Duplicates,
		SchedulerRequests: atTo.schedulers - atFrom.schedulers, MarkRequests: atTo.marks - atFrom.marks,
		OK: v.ok(),
	}
	for _, s := range r.cfg.Schedules {
		rec.Schedules = append(rec.Schedules, s.Name)
	}
	for _, st := range states {
		rec.StateSent += st.Sent
		rec.StateSkipped += st.Skipped
	}
	if v.Expected > 0 {
		rec.RequestsPerOccurrence = float64(rec.SchedulerRequests+rec.MarkRequests) / float64(v.Expected)
	}
	return rec
}

// logf prints a progress line and keeps it among the run's events.
func (r *scheduleRun) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	at := time.Since(r.born).Seconds()
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.progress, "schedule %5.1fs: %s\n", at, s)
	_ = r.events.line(fmt.Sprintf("%.3f", at), s)
}
