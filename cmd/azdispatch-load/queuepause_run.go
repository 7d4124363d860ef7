package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// queuePauseRun is one variant's run, as its coordinator sees it.
type queuePauseRun struct {
	cfg      queuePauseConfig
	variant  queuePauseVariant
	progress io.Writer
	dir      string // the workers' stderr files
	cs       string // holds the key: never printed
	queue    string
	q        *azdispatch.Queue // the coordinator's own: the trickle, the pause, the probes
	tl       *queuePauseTimeline
	wg       sync.WaitGroup // the workers' stdout readers
	procs    []*queuePauseProc
}

// runQueuePauseVariant runs one variant on an emulator of its own, whose
// clock is the variant's offset from this machine's from its first answer.
// The workers' stderr files are kept, and named, if a threshold fails.
func runQueuePauseVariant(ctx context.Context, cfg queuePauseConfig, v queuePauseVariant, progress io.Writer) (queuePauseRecord, error) {
	rec := queuePauseRecord{
		Scenario: "pause", Variant: v.name, Workers: cfg.Workers, ServiceOffsetS: v.offset.Seconds(),
		ScaleIntervalS: cfg.Interval.Seconds(), SlackS: cfg.Slack.Seconds(), PauseS: cfg.Pause.Seconds(),
	}
	em, err := azurite.Start(ctx, &azurite.Options{ClockOffset: v.offset})
	if err != nil {
		return rec, fmt.Errorf("%w\n%s", err, azurite.HowTo)
	}
	defer func() { _ = em.Stop() }()
	dir, err := os.MkdirTemp("", "azdispatch-pause-")
	if err != nil {
		return rec, err
	}
	r := &queuePauseRun{cfg: cfg, variant: v, progress: progress, dir: dir, cs: em.ConnectionString(),
		queue: queueName("pause"), tl: newQueuePauseTimeline(cfg.Workers)}
	err = r.run(ctx, &rec)
	if err == nil && rec.OK {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(progress, "pause: %s: the workers' stderr is kept in %s\n", v.name, dir)
	}
	return rec, err
}

// run is the variant's course: workers, trickle, warm-up, pause, probes,
// the end, the drain, the judge.
func (r *queuePauseRun) run(ctx context.Context, rec *queuePauseRecord) error {
	var err error
	if r.q, err = openQueue(r.cs, r.queue, 0); err != nil {
		return err
	}
	if err := r.q.Create(ctx); err != nil {
		return err
	}
	defer func() {
		killRunning(r.procs)
		r.wg.Wait()
	}()
	if err := r.startWorkers(ctx); err != nil {
		return err
	}
	if err := awaitReports(ctx, r.procs); err != nil {
		return err
	}
	tr, err := startTrickle(ctx, r.q, r.cfg.Rate)
	if err != nil {
		return err
	}
	defer func() { _, _ = tr.end() }() // a run cut short: end() is idempotent
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	plan, err := r.pause(ctx, rec)
	if err != nil {
		return err
	}
	probes, err := r.probe(ctx, plan, tr)
	if err != nil {
		return err
	}
	// Every worker's first receive after the end has had its bound, and
	// the trickle goes on a while after.
	if err := sleepUntilTime(ctx, plan.until.Add(plan.interval+plan.slack+r.cfg.After)); err != nil {
		return err
	}
	sent, err := tr.end()
	if err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "pause: %s: %d sent; waiting for every one to be handled\n", r.variant.name, sent)
	if err := pollUntil(ctx, 2*time.Minute, func() bool { return r.tl.allHandled(sent) }); err != nil {
		return err
	}
	if err := stopChildren(r.procs, r.procs, time.Minute); err != nil {
		return err
	}
	r.wg.Wait()
	if rec.Left, err = r.q.Depth(ctx); err != nil {
		return err
	}
	judgeQueuePause(rec, plan, r.tl.snapshot(), sent, probes)
	return nil
}

// startWorkers starts the worker processes, each one listener, an
// interval's share apart: a listener reads its pause first as it starts,
// and again once an interval has passed, so that started together they
// would read it at the same moments, and the pause would fall at one
// place in their intervals. Spread, one of them reads it late in its
// interval, and its last receive comes near the bound.
func (r *queuePauseRun) startWorkers(ctx context.Context) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for w := range r.cfg.Workers {
		if w > 0 {
			if err := sleepCtx(ctx, r.cfg.Interval/time.Duration(r.cfg.Workers)); err != nil {
				return err
			}
		}
		env, err := queuePauseRole.env(queuePauseWorkerConfig{Queue: r.queue, Worker: w, Seed: time.Now().UnixNano(),
			Interval: r.cfg.Interval, HoldMin: r.cfg.HoldMin, HoldMax: r.cfg.HoldMax}, r.cs)
		if err != nil {
			return err
		}
		p := &queuePauseProc{worker: w}
		c, err := startChild(exe, env, filepath.Join(r.dir, fmt.Sprintf("worker%d.stderr", w)), &r.wg, func(line []byte) {
			p.heard.Store(true)
			r.tl.take(w, line)
		})
		if err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
		p.child = c
		r.procs = append(r.procs, p)
	}
	return nil
}

// warmUp waits until every worker has handled a few messages and
// WarmUp has passed: all three are receiving when the pause comes.
func (r *queuePauseRun) warmUp(ctx context.Context) error {
	const each = 3
	from := time.Now()
	err := pollUntil(ctx, time.Minute, func() bool {
		return time.Since(from) >= r.cfg.WarmUp && slices.Min(r.tl.handledEach()) >= each
	})
	if err != nil {
		return fmt.Errorf("warm-up: each worker to handle %d messages (handled %v): %w", each, r.tl.handledEach(), err)
	}
	return nil
}

// pause pauses the queue from the coordinator's own client, and returns
// the plan the judge holds the workers to.
func (r *queuePauseRun) pause(ctx context.Context, rec *queuePauseRecord) (queuePausePlan, error) {
	called := time.Now()
	st, err := r.q.Pause(ctx, r.cfg.Pause, &azdispatch.PauseOptions{By: "load test: the pause scenario, " + r.variant.name})
	returned := time.Now()
	if err != nil {
		return queuePausePlan{}, err
	}
	learned := r.q.ServiceTime().Sub(time.Now())
	rec.LearnedOffsetS = learned.Seconds()
	// The Date header is to the second, and the client keeps its lower
	// end: an offset more than two seconds from the one given is an
	// emulator whose clock did not move, and the run would show nothing.
	if d := learned - r.variant.offset; d < -2*time.Second || d > 2*time.Second {
		return queuePausePlan{}, fmt.Errorf("the emulator's clock is %v from this machine's, not %v", learned, r.variant.offset)
	}
	plan := queuePausePlan{called: called, returned: returned, until: st.Until.Add(-r.variant.offset), serviceUntil: st.Until,
		interval: r.cfg.Interval, slack: r.cfg.Slack, holdLong: r.cfg.HoldMax}
	fmt.Fprintf(r.progress, "pause: %s: paused until %s on the service's clock, %s here (%.1f s from now)\n",
		r.variant.name, st.Until.Format(time.TimeOnly), plan.until.Format(time.TimeOnly), time.Until(plan.until).Seconds())
	return plan, nil
}

// pauseProbeEvery is the time between two probes for hidden messages.
const pauseProbeEvery = time.Second

// probe looks for hidden messages from when the pause is quiet until
// shortly before its end (see queuePauseProbe).
func (r *queuePauseRun) probe(ctx context.Context, plan queuePausePlan, tr *trickle) ([]queuePauseProbe, error) {
	if err := sleepUntilTime(ctx, plan.quiet()); err != nil {
		return nil, err
	}
	var probes []queuePauseProbe
	for last := plan.until.Add(-pauseProbeLead); time.Now().Before(last); {
		p, err := probeHidden(ctx, r.q, tr, r.tl)
		if err != nil {
			return nil, fmt.Errorf("probing for hidden messages: %w", err)
		}
		// A probe whose requests ran past the end saw a queue no
		// longer paused.
		if time.Now().Before(plan.until) {
			probes = append(probes, p)
		}
		if err := sleepCtx(ctx, min(pauseProbeEvery, time.Until(last))); err != nil {
			return nil, err
		}
	}
	return probes, nil
}

// sleepUntilTime sleeps until t by the local clock, or until ctx ends.
func sleepUntilTime(ctx context.Context, t time.Time) error {
	return sleepCtx(ctx, time.Until(t))
}

// pollUntil polls done until it holds, or within has passed (an error), or
// ctx ends.
func pollUntil(ctx context.Context, within time.Duration, done func() bool) error {
	deadline := time.Now().Add(within)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", within)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}
