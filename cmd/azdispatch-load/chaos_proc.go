package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// workerProc is one incarnation of a worker: a process of this binary in
// the worker role.
type workerProc struct {
	*child
	worker, number int
	log            string // its record file

	statusMu sync.Mutex
	status   workerStatus
	heard    bool // a status has come
}

// start runs incarnation number of worker, in mode.
func (r *chaosRun) start(worker, number int, mode faultMode) (*workerProc, error) {
	name := fmt.Sprintf("worker%d-%d", worker, number)
	p := &workerProc{worker: worker, number: number, log: filepath.Join(r.dir, name+".log")}
	cfg, err := json.Marshal(chaosWorkerConfig{
		Queue: r.queue, Log: p.log, Worker: worker, Incarnation: number, Seed: r.seed, Mode: mode.String(),
		Rates: r.cfg.Worker, Visibility: r.cfg.Visibility, TryTimeout: r.cfg.TryTimeout, MaxDequeue: r.cfg.MaxDequeue,
		LongShare: r.cfg.LongShare, Short: r.cfg.Short, Long: r.cfg.Long, IdleClose: r.cfg.IdleClose,
	})
	if err != nil {
		return nil, err
	}
	// The record file exists from the start, so that a process killed
	// before it opened it has an empty record rather than none.
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	env := []string{chaosWorkerEnv + "=" + string(cfg), chaosConnEnv + "=" + r.workerCS}
	c, err := startChild(r.exe, env, filepath.Join(r.dir, name+".stderr"), &r.wg, func(line []byte) {
		var st workerStatus
		if json.Unmarshal(line, &st) == nil {
			p.statusMu.Lock()
			p.status, p.heard = st, true
			p.statusMu.Unlock()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("worker %d: %w", worker, err)
	}
	p.child = c
	r.mu.Lock()
	r.all = append(r.all, p)
	r.mu.Unlock()
	return p, nil
}

// awaitWorkers waits until every worker has reported once.
func (r *chaosRun) awaitWorkers(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range r.procs {
		for !p.hasReported() {
			select {
			case <-p.done:
				return fmt.Errorf("worker %d exited at start: %s", p.worker, p.stderrTail())
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("worker %d did not report within 30 s: %s", p.worker, p.stderrTail())
			}
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// stopWorkers asks every worker to stop, and checks that each process that
// was not killed ended well.
func (r *chaosRun) stopWorkers() error {
	for _, p := range r.procs {
		p.command("stop")
		p.closeStdin()
	}
	var errs []error
	for _, p := range r.procs {
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			p.kill()
			errs = append(errs, fmt.Errorf("worker %d did not stop within a minute", p.worker))
		}
	}
	r.mu.Lock()
	all := append([]*workerProc(nil), r.all...)
	r.mu.Unlock()
	for _, p := range all {
		if !p.wasKilled() && !p.cmd.ProcessState.Success() {
			errs = append(errs, fmt.Errorf("worker %d (process %d of it) ended with %v: %s", p.worker, p.number, p.cmd.ProcessState, p.stderrTail()))
		}
	}
	return errors.Join(errs...)
}

// killAll kills whatever still runs: the clean-up of a run cut short.
func (r *chaosRun) killAll() {
	for _, p := range r.procs {
		select {
		case <-p.done:
		default:
			p.kill()
		}
	}
}

func (p *workerProc) hasReported() bool {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	return p.heard
}

func (p *workerProc) lastStatus() workerStatus {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	return p.status
}
