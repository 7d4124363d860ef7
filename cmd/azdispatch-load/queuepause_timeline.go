package main

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"
)

// queuePauseLog is what one worker reported, in the order it came.
type queuePauseLog struct {
	receives []queuePauseRequest
	reads    []queuePauseRequest
	calls    []queuePauseCall  // ended
	open     map[int]time.Time // started and not ended, by message number: its start
	statuses []queuePauseStatus
	final    *queuePauseCounts
}

// queuePauseRequest is one receive or properties read: its start, and for
// a receive the messages it brought.
type queuePauseRequest struct {
	at       time.Time
	messages int
}

// queuePauseCall is one handler call.
type queuePauseCall struct {
	n          int
	start, end time.Time
	failed     bool
}

// queuePauseStatus is the listener's state as a worker last reported it.
type queuePauseStatus struct {
	at       time.Time
	inFlight int
	paused   bool
	until    time.Time // the pause as last read, on the service's clock
}

// queuePauseTimeline gathers the workers' reports as they come.
type queuePauseTimeline struct {
	mu      sync.Mutex
	logs    []queuePauseLog
	handled map[int]int // by message number: handler calls that ended well, all workers
}

func newQueuePauseTimeline(workers int) *queuePauseTimeline {
	t := &queuePauseTimeline{logs: make([]queuePauseLog, workers), handled: map[int]int{}}
	for i := range t.logs {
		t.logs[i].open = map[int]time.Time{}
	}
	return t
}

// take reads one line of worker w's stdout; a line that is not a report
// (a test binary's own output) is passed over.
func (t *queuePauseTimeline) take(w int, line []byte) {
	var r queuePauseReport
	if json.Unmarshal(line, &r) != nil || r.Kind == "" {
		return
	}
	at := time.Unix(0, r.At)
	t.mu.Lock()
	defer t.mu.Unlock()
	l := &t.logs[w]
	switch r.Kind {
	case pauseWorkerReceive:
		l.receives = append(l.receives, queuePauseRequest{at: at, messages: r.N})
	case pauseWorkerRead:
		l.reads = append(l.reads, queuePauseRequest{at: at})
	case pauseWorkerStart:
		l.open[r.N] = at
	case pauseWorkerEnd:
		start, ok := l.open[r.N]
		if !ok {
			break // an end with no start: no call of this worker's
		}
		delete(l.open, r.N)
		l.calls = append(l.calls, queuePauseCall{n: r.N, start: start, end: at, failed: r.Failed})
		if !r.Failed {
			t.handled[r.N]++
		}
	case pauseWorkerStatus:
		l.statuses = append(l.statuses, queuePauseStatus{at: at, inFlight: r.InFlight, paused: r.Paused, until: r.Until})
	case pauseWorkerFinal:
		l.final = r.Final
	}
}

// handledEach is how many messages each worker has handled so far.
func (t *queuePauseTimeline) handledEach() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, len(t.logs))
	for i, l := range t.logs {
		for _, c := range l.calls {
			if !c.failed {
				out[i]++
			}
		}
	}
	return out
}

// handledSet is the messages handled well so far, by any worker.
func (t *queuePauseTimeline) handledSet() map[int]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int]bool, len(t.handled))
	for n := range t.handled {
		out[n] = true
	}
	return out
}

// allHandled reports whether every message numbered 1 to sent has been
// handled well.
func (t *queuePauseTimeline) allHandled(sent int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n := 1; n <= sent; n++ {
		if t.handled[n] == 0 {
			return false
		}
	}
	return true
}

// inHand is the messages the workers have in hand, as each last said.
func (t *queuePauseTimeline) inHand() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum := 0
	for _, l := range t.logs {
		if n := len(l.statuses); n > 0 {
			sum += l.statuses[n-1].inFlight
		}
	}
	return sum
}

// snapshot copies the logs, for the judge.
func (t *queuePauseTimeline) snapshot() []queuePauseLog {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]queuePauseLog, len(t.logs))
	for i, l := range t.logs {
		out[i] = queuePauseLog{
			receives: slices.Clone(l.receives), reads: slices.Clone(l.reads), calls: slices.Clone(l.calls),
			open: maps.Clone(l.open), statuses: slices.Clone(l.statuses), final: l.final,
		}
	}
	return out
}
