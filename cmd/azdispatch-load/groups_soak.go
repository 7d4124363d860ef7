package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/azdispatch/azdispatch"
)

// soak starts groups until the configured duration has passed, while the
// chaos loop kills and pauses workers, then waits for them to settle.
func (r *groupsRun) soak(ctx context.Context) error {
	end := time.Now().Add(r.cfg.Duration)
	// Paced, so that each emulator's pauses to clean up what was deleted
	// stay a few seconds long.
	r.limit = rate.NewLimiter(rate.Limit(r.cfg.Rate), 16)
	var chaos sync.WaitGroup
	var chaosErr error
	chaos.Go(func() { chaosErr = r.chaos(ctx, end) })
	var err error
	for n := 1; err == nil && time.Now().Before(end); n++ {
		// A steady producer: a backlog of handled-to-be children at most.
		if _, err = r.waitFor(ctx, end, func() bool { return r.sent-r.ended < r.cfg.Backlog }); err != nil || !time.Now().Before(end) {
			break
		}
		err = r.startGroup(ctx, r.draw(n))
	}
	chaos.Wait()
	if err != nil || chaosErr != nil {
		return fmt.Errorf("%w%w", err, chaosErr)
	}
	r.mu.Lock()
	n, sent, ended := len(r.order), r.sent, r.ended
	r.mu.Unlock()
	r.logf("faults stopped: %d groups started, %d children sent, %d handled; waiting up to %v for the rest", n, sent, ended, r.cfg.Settle)
	settled, err := r.waitFor(ctx, time.Now().Add(r.cfg.Settle), r.settled)
	if err != nil {
		return err
	}
	if !settled {
		r.logf("not settled in %v: the verdict counts what is missing", r.cfg.Settle)
	}
	// A while more, for a continuation sent twice to show.
	return sleepCtx(ctx, 3*time.Second)
}

// draw makes the nth group: its size log-uniform in 1 to MaxChildren, its
// rule any, and under ContinueOnFinish and ContinueOnFailure, in half of
// the groups, up to one child in 20 failing for good.
func (r *groupsRun) draw(n int) *groupsSpec {
	size := int(math.Exp(r.rng.float() * math.Log(float64(r.cfg.MaxChildren)+0.999)))
	size = min(max(size, 1), r.cfg.MaxChildren)
	rules := []azdispatch.GroupRule{azdispatch.ContinueOnSuccess, azdispatch.ContinueOnFinish, azdispatch.ContinueOnFailure}
	g := &groupsSpec{id: fmt.Sprintf("soak-%d", n), size: size, rule: rules[r.rng.intN(len(rules))], fails: map[int]bool{}}
	if g.rule != azdispatch.ContinueOnSuccess && r.rng.chance(0.5) {
		for range 1 + r.rng.intN(max(1, size/20)) {
			g.fails[r.rng.intN(size)] = true
		}
	}
	return g
}

// chaos kills a worker every KillEvery and restarts it at once, and
// pauses one every PauseEvery for PauseFor (one at a time), until end. It
// alone changes r.procs and r.paused while it runs.
func (r *groupsRun) chaos(ctx context.Context, end time.Time) error {
	now := time.Now()
	nextKill := now.Add(r.rng.between(r.cfg.KillEvery[0], r.cfg.KillEvery[1]))
	nextPause := now.Add(r.rng.between(r.cfg.PauseEvery[0], r.cfg.PauseEvery[1]))
	var resumeAt time.Time
	for {
		wake := earliest(end, nextKill, nextPause)
		if r.paused != nil {
			wake = earliest(wake, resumeAt)
		}
		if err := sleepCtx(ctx, time.Until(wake)); err != nil {
			return err
		}
		now := time.Now()
		if r.paused != nil && !now.Before(resumeAt) {
			if err := resumeProcess(r.paused.cmd.Process); err != nil {
				return err
			}
			r.paused = nil
		}
		if !now.Before(end) {
			return nil
		}
		if !now.Before(nextKill) {
			slot := r.rng.intN(len(r.procs))
			p := r.procs[slot]
			if p == r.paused {
				r.paused = nil // SIGKILL ends a stopped process too
			}
			p.kill()
			np, err := r.start(slot, p.number+1)
			if err != nil {
				return err
			}
			r.procs[slot] = np
			r.mu.Lock()
			r.kills++
			r.mu.Unlock()
			nextKill = now.Add(r.rng.between(r.cfg.KillEvery[0], r.cfg.KillEvery[1]))
		}
		if pauseSupported && r.paused == nil && !now.Before(nextPause) {
			p := r.procs[r.rng.intN(len(r.procs))]
			if err := pauseProcess(p.cmd.Process); err != nil {
				return err
			}
			r.paused, resumeAt = p, now.Add(r.cfg.PauseFor)
			r.mu.Lock()
			r.pauses++
			r.mu.Unlock()
			nextPause = resumeAt.Add(r.rng.between(r.cfg.PauseEvery[0], r.cfg.PauseEvery[1]))
		}
	}
}

// big starts BigGroups groups of BigSize children, one after another, and
// waits for each one's continuation before the next.
func (r *groupsRun) big(ctx context.Context) error {
	if r.cfg.BigRate > 0 {
		r.limit = rate.NewLimiter(rate.Limit(r.cfg.BigRate), 16)
	}
	for n := 1; n <= r.cfg.BigGroups; n++ {
		g := &groupsSpec{id: fmt.Sprintf("big-%d", n), size: r.cfg.BigSize, rule: azdispatch.ContinueOnSuccess}
		start := time.Now()
		if err := r.startGroup(ctx, g); err != nil {
			return err
		}
		ok, err := r.waitFor(ctx, time.Now().Add(r.cfg.Settle), func() bool { return len(r.nexts[g.id]) > 0 })
		if err != nil {
			return err
		}
		if !ok {
			r.logf("group %s: no continuation within %v", g.id, r.cfg.Settle)
			break
		}
		r.logf("group %s of %d children continued %.1f s after it started; %s", g.id, g.size, time.Since(start).Seconds(), r.breakdown(g))
	}
	return sleepCtx(ctx, 3*time.Second)
}

// breakdown says when the last of each step of g's completion went out and
// came back, counted from its last child's end, and when its
// continuation was handled.
func (r *groupsRun) breakdown(g *groupsSpec) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last int64
	for i := range g.size {
		last = max(last, r.firstEnd[[2]any{g.id, i}])
	}
	s := func(at int64) string { return fmt.Sprintf("%+.2f", float64(at-last)/float64(time.Second)) }
	out := "from the last child's end:"
	for _, step := range []string{"shard-append", "shard-read", "head-append", "head-read", "next-send"} {
		k := [2]string{g.id, step}
		if step == "next-send" {
			k[0] = ""
		}
		if t, ok := r.traces[k]; ok {
			out += fmt.Sprintf(" %s %s..%s", step, s(t[0]), s(t[1]))
		}
	}
	if n := r.nexts[g.id]; len(n) > 0 {
		out += " handled " + s(n[0].at)
	}
	for _, step := range slices.Sorted(maps.Keys(r.took)) {
		d := r.took[step]
		slices.Sort(d)
		out += fmt.Sprintf("; %s ×%d p50 %v p99 %v max %v", step, len(d), d[len(d)/2].Round(time.Millisecond),
			d[len(d)*99/100].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	clear(r.took)
	return out
}

// judge makes the variant's record from what the workers reported.
func (r *groupsRun) judge(took time.Duration) groupsRecord {
	rec := r.judgeCounts()
	rec.DurationS = took.Seconds()
	return rec
}

// judgeCounts is judge but for the run's time.
func (r *groupsRun) judgeCounts() groupsRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := groupsRecord{Scenario: "groups", Variant: r.variant, Seed: r.seed, ByRule: map[string]int{},
		Groups: len(r.order), Kills: r.kills, Pauses: r.pauses, Processes: len(r.all)}
	problem := func(format string, args ...any) {
		if len(rec.Problems) < 10 {
			rec.Problems = append(rec.Problems, fmt.Sprintf(format, args...))
		}
	}
	var lat []float64
	for _, id := range r.order {
		g := r.groups[id]
		rec.ByRule[ruleName(g.rule)]++
		rec.Children += g.size
		var lastEnd, firstFail int64
		lost := 0
		for i := range g.size {
			k := [2]any{id, i}
			at, ok := r.firstEnd[k]
			if !ok {
				lost++
				continue
			}
			rec.Repeated += r.ends[k] - 1
			lastEnd = max(lastEnd, at)
			if g.fails[i] && (firstFail == 0 || at < firstFail) {
				firstFail = at
			}
		}
		if lost > 0 {
			rec.LostChildren += lost
			problem("group %s: %d of %d children never handled", id, lost, g.size)
		}
		if g.expectsNext() {
			rec.Expected++
		}
		nexts := r.nexts[id]
		switch {
		case len(nexts) == 0 && g.expectsNext():
			rec.Missing++
			problem("group %s (%s, %d children, %d failing): no continuation", id, ruleName(g.rule), g.size, len(g.fails))
			continue
		case len(nexts) == 0:
			continue
		case !g.expectsNext():
			rec.Unexpected++
			problem("group %s (%s, no child failing): continued", id, ruleName(g.rule))
			continue
		}
		rec.Continued++
		ids := map[string]bool{}
		first := nexts[0].at
		for _, n := range nexts {
			ids[n.id] = true
			first = min(first, n.at)
		}
		if len(ids) > 1 {
			rec.Twice++
			problem("group %s: continued from %d messages", id, len(ids))
		}
		need := lastEnd
		if g.rule == azdispatch.ContinueOnFailure {
			need = firstFail
		} else if lost > 0 {
			need = math.MaxInt64
		}
		if need == 0 || first < need {
			rec.Early++
			problem("group %s (%s): continued before the children its rule needs had finished", id, ruleName(g.rule))
		}
		if why := g.wrongOutcome(nexts[0].outcome); why != "" {
			rec.Wrong++
			problem("group %s (%s): %s", id, ruleName(g.rule), why)
		}
		if lost == 0 {
			lat = append(lat, float64(first-lastEnd)/float64(time.Second))
		}
	}
	for _, p := range r.all {
		p.mu.Lock()
		rec.BlobRequests += p.blob
		rec.TxPerChild += float64(p.all)
		rec.DupsDropped += p.dups
		p.mu.Unlock()
	}
	if r.acct != nil {
		blob, all := r.acct.requests()
		rec.BlobRequests += blob
		rec.TxPerChild += float64(all)
	}
	rec.Budget = int64(2*rec.Children + 3*rec.Groups)
	if rec.Children > 0 {
		rec.BlobPerChild = float64(rec.BlobRequests) / float64(rec.Children)
		rec.TxPerChild /= float64(rec.Children)
	}
	rec.OK = rec.Groups > 0 && rec.Twice == 0 && rec.Early == 0 && rec.Wrong == 0 && rec.Unexpected == 0 && rec.Missing == 0 &&
		rec.LostChildren == 0 && rec.BlobRequests <= rec.Budget
	if r.variant == "big" {
		slices.Sort(lat)
		rec.LatencyP50S, rec.LatencyP99S = quantile(lat, 0.5), quantile(lat, 0.99)
		if len(lat) > 0 {
			rec.LatencyMaxS = lat[len(lat)-1]
		}
		rec.LatencyBoundS = r.cfg.BigBound.Seconds()
		rec.OK = rec.OK && len(lat) == r.cfg.BigGroups && rec.LatencyP99S <= rec.LatencyBoundS
	} else {
		rec.OK = rec.OK && rec.Kills > 0 && (rec.Pauses > 0 || !pauseSupported)
	}
	return rec
}

// wrongOutcome says what is wrong with a continuation's outcome for the
// group, or "".
func (g *groupsSpec) wrongOutcome(o *azdispatch.GroupOutcome) string {
	if o == nil {
		return "its continuation carries no outcome"
	}
	if o.ID != g.id || o.Size != g.size {
		return fmt.Sprintf("outcome of group %q of %d", o.ID, o.Size)
	}
	nf := len(g.fails)
	want := "succeeded"
	if nf > 0 {
		want = "failed"
	}
	switch g.rule {
	case azdispatch.ContinueOnSuccess:
		if o.Outcome != "succeeded" || o.Succeeded != g.size || o.Failed != 0 {
			return fmt.Sprintf("%s, %d succeeded, %d failed", o.Outcome, o.Succeeded, o.Failed)
		}
	case azdispatch.ContinueOnFinish:
		if o.Outcome != want || o.Succeeded != g.size-nf || o.Failed != nf {
			return fmt.Sprintf("%s, %d succeeded, %d failed: want %s, %d and %d", o.Outcome, o.Succeeded, o.Failed, want, g.size-nf, nf)
		}
	case azdispatch.ContinueOnFailure:
		if o.Outcome != "failed" || o.Failed != 1 || o.FailedChild == nil || !g.fails[*o.FailedChild] {
			return fmt.Sprintf("%s, %d failed, failed child %v", o.Outcome, o.Failed, o.FailedChild)
		}
	}
	return ""
}

// ruleName names a rule in the record.
func ruleName(r azdispatch.GroupRule) string {
	switch r {
	case azdispatch.ContinueOnFinish:
		return "finish"
	case azdispatch.ContinueOnFailure:
		return "failure"
	}
	return "success"
}
