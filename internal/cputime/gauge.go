package cputime

import (
	"runtime"
	"sync"
	"time"
)

// Busy is the share of its cores (GOMAXPROCS) at or above which a process
// counts as filling them: the rest is what the operating system's
// accounting and a garbage collector's pauses leave unused even when
// every goroutine that could run does.
const Busy = 0.9

// Gauge tells whether this process has lately filled the cores Go may run
// it on: then the work it does is the CPU's, and more goroutines doing the
// same could only share the same cores. It measures over spans of at least
// Span, from the CPU time the operating system counted for the process, so
// neighbours on a shared machine make it read less busy, never more. It
// is safe for concurrent use.
type Gauge struct {
	read  func() (time.Duration, error) // Self, or a test's own
	procs func() int                    // GOMAXPROCS, or a test's own
	clock func() time.Time              // time.Now, or a test's own
	span  time.Duration

	mu       sync.Mutex
	from     time.Time     // start of the span being measured
	cpu0     time.Duration // the process's CPU time then
	known    bool          // a span has been measured since the last restart
	full     bool          // the last span measured found the cores filled
	unusable bool          // the CPU time cannot be read: never full
}

// NewGauge returns a gauge of this process whose first span starts now.
func NewGauge() *Gauge {
	return NewGaugeWith(Self, func() int { return runtime.GOMAXPROCS(0) }, time.Now, Span)
}

// NewGaugeWith returns a gauge that reads the CPU time used with read, the
// cores there are with procs and the time with clock, over spans of at
// least span: for a test that must not depend on how busy its machine is.
// Its first span starts now.
func NewGaugeWith(read func() (time.Duration, error), procs func() int, clock func() time.Time, span time.Duration) *Gauge {
	g := &Gauge{read: read, procs: procs, clock: clock, span: span}
	g.Restart()
	return g
}

// Restart begins a new span now, and forgets the verdict before it: after
// a change that alters how busy the process is (a goroutine more doing the
// work), Full reports it unknown until the change is measured.
func (g *Gauge) Restart() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unusable {
		return
	}
	g.from, g.known = g.sample(), false
}

// Full reports whether the process filled its cores over the last span
// measured, and known false while the first span since the gauge was made
// or restarted is still under way. Where the CPU time cannot be read, it
// reports (false, true): never full.
func (g *Gauge) Full() (full, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.unusable {
		return false, true
	}
	cpu0, from := g.cpu0, g.from
	if g.clock().Sub(from) < g.span {
		return g.full, g.known
	}
	now := g.sample()
	if g.unusable {
		return false, true
	}
	g.full = float64(g.cpu0-cpu0) >= Busy*float64(g.procs())*float64(now.Sub(from))
	g.known, g.from = true, now
	return g.full, g.known
}

// sample reads the CPU time and the clock together, as close as they can
// be, into cpu0, and returns the time; a failed read makes the gauge
// unusable. The caller holds mu.
func (g *Gauge) sample() time.Time {
	cpu, err := g.read()
	now := g.clock()
	if err != nil {
		g.unusable = true
	}
	g.cpu0 = cpu
	return now
}
