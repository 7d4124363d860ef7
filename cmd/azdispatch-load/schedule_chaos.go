package main

import (
	"context"
	"time"
)

// scheduleFault is a fault the schedule scenario makes.
type scheduleFault int

const (
	faultKillProc  scheduleFault = iota // SIGKILL, and a restart at once
	faultPauseProc                      // SIGSTOP for PauseFor, then SIGCONT
)

func (f scheduleFault) String() string {
	if f == faultPauseProc {
		return "pause"
	}
	return "kill"
}

// armedFault is an aimed fault waiting for a process to report a claim or
// a send.
type armedFault struct {
	kind  scheduleFault
	at    string    // "claim" or "sent"
	until time.Time // then it falls at random
}

// aimLag is the oldest report an aimed fault still falls on: one read later
// than that (the chaos loop was busy restarting a process) is stale.
const aimLag = 5 * time.Millisecond

// chaos makes faults until end, one at a time, from the seed: kills every
// KillEvery, pauses every PauseEvery (one process stopped at most), each
// aimed at a claim or a send with probability Aim (and AimGap since the
// last aimed one), else on any process. The process of this goroutine
// alone changes procs and paused.
func (r *scheduleRun) chaos(ctx context.Context, end time.Time) error {
	r.end = end
	now := time.Now()
	nextKill := now.Add(r.rng.between(r.cfg.KillEvery[0], r.cfg.KillEvery[1]))
	nextPause := now.Add(r.rng.between(r.cfg.PauseEvery[0], r.cfg.PauseEvery[1]))
	var armed *armedFault
	for {
		wake := end
		if r.paused != nil {
			wake = earliest(wake, r.resumeAt)
		}
		if armed != nil {
			wake = earliest(wake, armed.until)
		} else {
			wake = earliest(wake, nextKill, nextPause)
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case ev := <-r.activity:
			t.Stop()
			if armed != nil && ev.what == armed.at && time.Since(ev.seen) < aimLag && r.eligible(ev.p, armed.kind) {
				if err := r.fault(armed.kind, ev.p, ev.what); err != nil {
					return err
				}
				armed, r.lastAim = nil, time.Now()
			}
			continue
		case <-t.C:
		}
		now = time.Now()
		switch {
		case r.paused != nil && !now.Before(r.resumeAt):
			r.resume()
		case !now.Before(end):
			return nil
		case armed != nil:
			// Nothing to aim at in time: at random after all.
			kind := armed.kind
			armed = nil
			if err := r.faultAtRandom(kind); err != nil {
				return err
			}
		default:
			kind := faultKillProc
			if nextPause.Before(nextKill) {
				kind = faultPauseProc
				nextPause = now.Add(r.rng.between(r.cfg.PauseEvery[0], r.cfg.PauseEvery[1]))
				if r.paused != nil {
					continue // one stopped at a time: this one is skipped
				}
			} else {
				nextKill = now.Add(r.rng.between(r.cfg.KillEvery[0], r.cfg.KillEvery[1]))
			}
			if r.rng.chance(r.cfg.Aim) && now.Sub(r.lastAim) > r.cfg.AimGap {
				at := "claim"
				if r.rng.chance(0.5) {
					at = "sent"
				}
				armed = &armedFault{kind: kind, at: at, until: now.Add(r.cfg.AimWait)}
				continue
			}
			if err := r.faultAtRandom(kind); err != nil {
				return err
			}
		}
	}
}

// eligible reports whether kind may fall on p: p runs (it is not the one
// stopped), and another runs besides, so that one always does. A pause
// also ends before the faults do, so that it lasts its full length.
func (r *scheduleRun) eligible(p *scheduleProc, kind scheduleFault) bool {
	if kind == faultPauseProc && (r.paused != nil || time.Now().Add(r.cfg.PauseFor).After(r.end)) {
		return false
	}
	others := 0
	for _, q := range r.procs {
		if q == p && q == r.paused {
			return false
		}
		if q != p && q != r.paused {
			others++
		}
	}
	return others > 0 && r.procs[p.slot] == p
}

// faultAtRandom makes kind fall on a process drawn among the eligible.
func (r *scheduleRun) faultAtRandom(kind scheduleFault) error {
	var can []*scheduleProc
	for _, p := range r.procs {
		if r.eligible(p, kind) {
			can = append(can, p)
		}
	}
	if len(can) == 0 {
		return nil
	}
	return r.fault(kind, can[r.rng.intN(len(can))], "")
}

// fault makes kind fall on p; aimed says at what ("" for at random).
func (r *scheduleRun) fault(kind scheduleFault, p *scheduleProc, aimed string) error {
	how := "at random"
	if aimed != "" {
		how = "aimed at a " + aimed
	}
	switch kind {
	case faultKillProc:
		p.kill()
		r.mu.Lock()
		r.kills++
		if aimed != "" {
			r.killsAim++
		}
		n := r.kills
		r.mu.Unlock()
		np, err := r.start(p.slot, p.number+1)
		if err != nil {
			return err
		}
		r.procs[p.slot] = np
		r.logf("kill %d (%s): %s killed, %s started", n, how, p.instance, np.instance)
	case faultPauseProc:
		if err := pauseProcess(p.cmd.Process); err != nil {
			return err
		}
		r.paused, r.resumeAt = p, time.Now().Add(r.cfg.PauseFor)
		r.mu.Lock()
		r.pauses++
		if aimed != "" {
			r.pauseAim++
		}
		n := r.pauses
		r.mu.Unlock()
		r.logf("pause %d (%s): %s stopped for %v", n, how, p.instance, r.cfg.PauseFor)
	}
	return nil
}

// resume lets the stopped process run again.
func (r *scheduleRun) resume() {
	p := r.paused
	r.paused = nil
	if err := resumeProcess(p.cmd.Process); err != nil {
		r.logf("resuming %s: %v", p.instance, err)
		return
	}
	r.logf("%s resumed", p.instance)
}

// earliest returns the earliest of ts.
func earliest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.Before(t) {
			t = u
		}
	}
	return t
}
