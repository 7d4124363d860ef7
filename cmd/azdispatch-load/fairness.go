package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/azdispatch/azdispatch"
)

// fairnessConfig sizes the fairness scenario; the zero value is its
// defaults, and a test shrinks it.
type fairnessConfig struct {
	Tenants    int           // queues in the set, the flood's and the quiet one's among them
	Flood      int           // messages the flooding tenant has queued
	Cap        int           // every tenant's cap
	QuietBurst int           // the quiet tenant sends this many at once...
	QuietEvery time.Duration // ...this often...
	Window     time.Duration // ...for this long
	Hold       time.Duration // a handler call's time
	Rounds     int           // runs of each variant, alternated

	IdleQueues int           // idle: the set's queues
	IdleMax    time.Duration // idle: the listener's longest idle wait
	IdleWarmup time.Duration // idle: how long before requests are counted
	IdleWindow time.Duration // idle: how long requests are counted
}

func (c fairnessConfig) withDefaults() fairnessConfig {
	setIf(&c.Tenants, 10)
	setIf(&c.Flood, 100_000)
	setIf(&c.Cap, fairConcurrency*fairDequeuers/2)
	setIf(&c.QuietBurst, 40)
	setIf(&c.QuietEvery, 200*time.Millisecond)
	setIf(&c.Window, 5*time.Second)
	setIf(&c.Hold, 50*time.Millisecond)
	setIf(&c.Rounds, 3)
	setIf(&c.IdleQueues, 100)
	setIf(&c.IdleMax, 200*time.Millisecond)
	setIf(&c.IdleWarmup, 6*time.Second)
	setIf(&c.IdleWindow, 10*time.Second)
	return c
}

// The listener of both variants: 32 handlers, on two receive loops that
// receive one message at a time, so that a handler slot freed is taken
// again at once, by the queue whose turn it is.
const fairConcurrency, fairDequeuers, fairBatch = 16, 2, 1

// fairnessRecord is one line of the fairness scenario's -json output.
type fairnessRecord struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	OK       bool   `json:"ok"`

	// flood: the quiet tenant's wait (send to handler start), p99 per
	// round and their median, without the flood and with it, and the
	// change.
	QuietP99BaseMS  []float64 `json:"quiet_p99_base_ms,omitempty"`
	QuietP99FloodMS []float64 `json:"quiet_p99_flood_ms,omitempty"`
	BaseMS          float64   `json:"quiet_p99_base_median_ms,omitempty"`
	FloodMS         float64   `json:"quiet_p99_flood_median_ms,omitempty"`
	Change          float64   `json:"change,omitempty"`
	QuietMessages   int       `json:"quiet_messages,omitempty"`
	FloodServed     int       `json:"flood_served,omitempty"` // during the last flood round's window
	Flood           int       `json:"flood,omitempty"`
	Cap             int       `json:"cap_per_tenant,omitempty"` // 0: none
	Handlers        int       `json:"handlers,omitempty"`
	HandlerMS       float64   `json:"handler_ms,omitempty"`

	// idle: requests per hour of a listener over one idle queue and over
	// a set of IdleQueues, both with wake-ups, at the same idle pace; their
	// ratio; and, without wake-ups, how long a message sent to one of the
	// set's queues may wait to be found at that pace.
	Queues           int     `json:"queues,omitempty"`
	OneQueuePerHour  float64 `json:"one_queue_requests_per_hour,omitempty"`
	SetPerHour       float64 `json:"set_requests_per_hour,omitempty"`
	Ratio            float64 `json:"ratio,omitempty"`
	IdleMaxS         float64 `json:"idle_max_s,omitempty"`
	NoWakeWorstWaitS float64 `json:"no_wake_worst_wait_s,omitempty"`
}

// runFairness measures how a flood on one tenant's queue changes a quiet
// tenant's wait under fair shares, and what a set of idle queues costs.
func runFairness(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	c := o.fairness.withDefaults()
	var recs []record
	var lines []string
	for _, capped := range []bool{true, false} {
		f, err := floodRounds(ctx, c, capped, progress)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, record{Own: f})
		lines = append(lines, fmt.Sprintf("%s: a flood of %d, each tenant's cap %d of %d handlers: quiet tenant's p99 %.1f ms without it, %.1f ms with it (%+.1f %%); flood served %d meanwhile (ok %v)",
			f.Variant, c.Flood, f.Cap, f.Handlers, f.BaseMS, f.FloodMS, 100*f.Change, f.FloodServed, f.OK))
	}
	fmt.Fprintf(progress, "fairness: idle, %d queues\n", c.IdleQueues)
	idle, err := idleSet(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	lines = append(lines, fmt.Sprintf("idle, wake-ups, polls up to every %v: one queue %.0f requests/hour, %d queues %.0f (%.2f×); without wake-ups a message waits up to %.0f s (ok %v)",
		c.IdleMax, idle.OneQueuePerHour, idle.Queues, idle.SetPerHour, idle.Ratio, idle.NoWakeWorstWaitS, idle.OK))
	return append(recs, record{Own: idle}), lines, nil
}

// floodRounds runs the quiet tenant without the flood and with it, in
// turns, with every tenant capped at Cap or uncapped. Only the capped
// variant is judged: without caps a flood holds every handler, and a quiet
// tenant's message waits for one to free.
func floodRounds(ctx context.Context, c fairnessConfig, capped bool, progress io.Writer) (fairnessRecord, error) {
	f := fairnessRecord{Scenario: "fairness", Variant: "flood", Flood: c.Flood, Handlers: fairConcurrency * fairDequeuers, HandlerMS: ms(c.Hold)}
	if capped {
		f.Cap = c.Cap
	} else {
		f.Variant = "flood-uncapped"
	}
	for round := range c.Rounds {
		for _, flood := range []bool{false, true} {
			fmt.Fprintf(progress, "fairness: %s, round %d, flood %v\n", f.Variant, round+1, flood)
			p99, quiet, served, err := quietWait(ctx, c, f.Cap, flood)
			if err != nil {
				return f, err
			}
			f.QuietMessages = quiet
			if flood {
				f.QuietP99FloodMS = append(f.QuietP99FloodMS, ms(p99))
				f.FloodServed = served
			} else {
				f.QuietP99BaseMS = append(f.QuietP99BaseMS, ms(p99))
			}
		}
	}
	f.BaseMS, f.FloodMS = median(f.QuietP99BaseMS), median(f.QuietP99FloodMS)
	f.Change = (f.FloodMS - f.BaseMS) / f.BaseMS
	// Judged one way: a flood that makes the quiet tenant faster (the
	// listener is awake, not waiting out an idle pause) is no harm.
	f.OK = !capped || f.Change < 0.10 && f.FloodServed > 0
	return f, nil
}

// quietWait runs the quiet tenant's bursts through a set of Tenants
// queues, with the flood queued on another one if flood is set, and
// returns the quiet tenant's p99 wait, its messages, and the flood's
// messages handled meanwhile.
func quietWait(ctx context.Context, c fairnessConfig, capEach int, flood bool) (time.Duration, int, int, error) {
	members := make([]azdispatch.SetMember, c.Tenants)
	for i := range members {
		members[i].Cap = capEach
	}
	r, err := newSetRun("fair", members, false, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	if flood {
		if err := r.send(ctx, 0, c.Flood); err != nil {
			return 0, 0, 0, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	wait, err := r.listen(runCtx, c.Hold, &azdispatch.ListenerOptions{Concurrency: fairConcurrency,
		Scaling: azdispatch.ScalingOptions{MinDequeuers: fairDequeuers, MaxDequeuers: fairDequeuers, BatchSize: fairBatch}})
	if err != nil {
		return 0, 0, 0, err
	}
	if flood {
		_ = until(runCtx, func() bool { return r.total() >= fairConcurrency*fairDequeuers })
	}
	bursts := int(c.Window / c.QuietEvery)
	for range bursts {
		if err := r.send(ctx, 1, c.QuietBurst); err != nil {
			return 0, 0, 0, err
		}
		time.Sleep(c.QuietEvery)
	}
	want := bursts * c.QuietBurst
	deadline, cancel := context.WithTimeout(ctx, time.Minute)
	_ = until(deadline, func() bool { return len(r.waitsOf(1)) >= want })
	cancel()
	served := r.first(r.total())[r.queues[0].Name()]
	stop()
	if err := wait(); err != nil {
		return 0, 0, 0, err
	}
	ws := r.waitsOf(1)
	if len(ws) < want {
		return 0, 0, 0, fmt.Errorf("fairness: the quiet tenant's %d of %d handled in a minute", len(ws), want)
	}
	return durationQuantile(ws, 0.99), len(ws), served, nil
}

// idleSet counts the requests of a listener over one idle queue and over
// a set of IdleQueues, with wake-ups, for IdleWindow at the same pace.
func idleSet(ctx context.Context, c fairnessConfig) (fairnessRecord, error) {
	rec := fairnessRecord{Scenario: "fairness", Variant: "idle", Queues: c.IdleQueues, IdleMaxS: c.IdleMax.Seconds()}
	var perHour []float64
	for _, n := range []int{1, c.IdleQueues} {
		r, err := newSetRun(fmt.Sprintf("idle-%d", n), make([]azdispatch.SetMember, n), false, nil)
		if err != nil {
			return rec, err
		}
		runCtx, stop := context.WithCancel(ctx)
		wait, err := r.listen(runCtx, 0, &azdispatch.ListenerOptions{Scaling: azdispatch.ScalingOptions{Idle: azdispatch.ExponentialIdle(0, c.IdleMax)}})
		if err != nil {
			stop()
			return rec, err
		}
		// Counted from after the first look at every queue (a request
		// each, once) and their first rest: what an idle hour costs.
		time.Sleep(c.IdleWarmup)
		before := r.requests()
		time.Sleep(c.IdleWindow)
		total := r.requests() - before
		stop()
		if err := wait(); err != nil {
			return rec, err
		}
		perHour = append(perHour, float64(total)*float64(time.Hour)/float64(c.IdleWindow))
	}
	rec.OneQueuePerHour, rec.SetPerHour = perHour[0], perHour[1]
	rec.Ratio = rec.SetPerHour / rec.OneQueuePerHour
	// Without wake-ups an idle set asks one queue per idle poll, the one
	// asked longest ago: a message waits for at most a round of them.
	rec.NoWakeWorstWaitS = float64(c.IdleQueues) * c.IdleMax.Seconds()
	rec.OK = rec.Ratio <= 1.1
	return rec, nil
}
