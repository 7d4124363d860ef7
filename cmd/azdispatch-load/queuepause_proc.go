package main

import (
	"fmt"
	"sync/atomic"
)

// queuePauseProc is one worker process of a pause run.
type queuePauseProc struct {
	*child
	worker int
	heard  atomic.Bool // a first line has come on its stdout
}

func (p *queuePauseProc) slotName() string  { return fmt.Sprintf("worker %d", p.worker) }
func (p *queuePauseProc) procName() string  { return p.slotName() }
func (p *queuePauseProc) hasReported() bool { return p.heard.Load() }
