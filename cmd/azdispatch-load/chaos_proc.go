package main

import (
	"encoding/json"
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
	env, err := chaosRole.env(chaosWorkerConfig{
		Queue: r.queue, Log: p.log, Worker: worker, Incarnation: number, Seed: r.seed, Mode: mode.String(),
		Rates: r.cfg.Worker, Visibility: r.cfg.Visibility, TryTimeout: r.cfg.TryTimeout, MaxDequeue: r.cfg.MaxDequeue,
		LongShare: r.cfg.LongShare, Short: r.cfg.Short, Long: r.cfg.Long, IdleClose: r.cfg.IdleClose,
	}, r.workerCS)
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

// stopWorkers stops every worker, and checks that each process of them
// ended well (see stopChildren). A worker's listener lets its handlers
// finish before it stops: a minute for it.
func (r *chaosRun) stopWorkers() error {
	r.mu.Lock()
	all := append([]*workerProc(nil), r.all...)
	r.mu.Unlock()
	return stopChildren(r.procs, all, time.Minute)
}

func (p *workerProc) slotName() string { return fmt.Sprintf("worker %d", p.worker) }

func (p *workerProc) procName() string {
	return fmt.Sprintf("worker %d (process %d of it)", p.worker, p.number)
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
