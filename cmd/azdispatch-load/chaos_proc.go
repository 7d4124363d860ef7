package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// workerProc is one incarnation of a worker: a process of this binary in
// the worker role.
type workerProc struct {
	worker, number int
	log, stderr    string // its record file and its log
	cmd            *exec.Cmd
	done           chan struct{} // closed once its stdout ended and it was waited for

	mu     sync.Mutex
	stdin  io.WriteCloser
	status workerStatus
	heard  bool // a status has come
	killed bool
}

// start runs incarnation number of worker, in mode.
func (r *chaosRun) start(worker, number int, mode faultMode) (*workerProc, error) {
	name := fmt.Sprintf("worker%d-%d", worker, number)
	p := &workerProc{worker: worker, number: number, done: make(chan struct{}),
		log: filepath.Join(r.dir, name+".log"), stderr: filepath.Join(r.dir, name+".stderr")}
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
	errOut, err := os.Create(p.stderr)
	if err != nil {
		return nil, err
	}
	defer errOut.Close() // the child has its own copy once started
	cmd := exec.Command(r.exe)
	cmd.Env = append(os.Environ(), chaosWorkerEnv+"="+string(cfg), chaosConnEnv+"="+r.workerCS)
	cmd.Stderr = errOut
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting worker %d: %w", worker, err)
	}
	p.cmd, p.stdin = cmd, stdin
	r.wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var st workerStatus
			if json.Unmarshal(sc.Bytes(), &st) == nil {
				p.mu.Lock()
				p.status, p.heard = st, true
				p.mu.Unlock()
			}
		}
		_ = cmd.Wait() // only after every read from stdout, as exec requires
		close(p.done)
	})
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

// command sends one command line; a process that is gone ignores it.
func (p *workerProc) command(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin != nil {
		_, _ = io.WriteString(p.stdin, line+"\n")
	}
}

func (p *workerProc) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
}

// kill ends the process at once and waits for it.
func (p *workerProc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.done
	p.closeStdin()
}

func (p *workerProc) wasKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

func (p *workerProc) hasReported() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heard
}

func (p *workerProc) lastStatus() workerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// stderrTail is the end of the process's log, for an error message.
func (p *workerProc) stderrTail() string {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
