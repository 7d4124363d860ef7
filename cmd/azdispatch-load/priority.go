package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/azdispatch/azdispatch"
)

// priorityConfig sizes the priority scenario; the zero value is its
// defaults, and a test shrinks it.
type priorityConfig struct {
	Weights  []int // weighted: the queues' weights
	Messages int   // weighted: handler calls counted

	Backlog   int           // strict: low-level messages queued before the run
	Hold      time.Duration // strict: how long each handler call takes
	HighEvery time.Duration // strict: one high-level message this often
	Highs     int           // strict: how many
}

func (c priorityConfig) withDefaults() priorityConfig {
	if len(c.Weights) == 0 {
		c.Weights = []int{1, 2, 5}
	}
	setIf(&c.Messages, 10_000)
	setIf(&c.Backlog, 20_000)
	setIf(&c.Hold, 20*time.Millisecond)
	setIf(&c.HighEvery, 50*time.Millisecond)
	setIf(&c.Highs, 100)
	return c
}

// setIf sets *v to d if it is zero.
func setIf[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// priorityRecord is one line of the priority scenario's -json output.
type priorityRecord struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	OK       bool   `json:"ok"`

	// weighted: each queue's weight, served count and share of the first
	// Messages handler calls, and the worst |share − weight share| ÷
	// weight share.
	Weights    []int     `json:"weights,omitempty"`
	Served     []int     `json:"served,omitempty"`
	Shares     []float64 `json:"shares,omitempty"`
	WorstError float64   `json:"worst_relative_error,omitempty"`

	// strict: the high level's waits, send to handler start, while the low
	// level keeps every handler busy; a handler call's time.
	HighP50MS float64 `json:"high_p50_ms,omitempty"`
	HighP99MS float64 `json:"high_p99_ms,omitempty"`
	HighMaxMS float64 `json:"high_max_ms,omitempty"`
	Highs     int     `json:"highs,omitempty"`
	HandlerMS float64 `json:"handler_ms,omitempty"`
	Handlers  int     `json:"handlers,omitempty"`
	LowServed int     `json:"low_served,omitempty"` // low-level calls meanwhile
}

// runPriority measures a queue set's weighted shares with every queue
// saturated, and, under strict priority, how long a high-level message
// sent into a full system waits, with wake-ups and without.
func runPriority(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	c := o.priority.withDefaults()
	fmt.Fprintf(progress, "priority: weighted shares over %d messages\n", c.Messages)
	w, err := weightedShares(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	recs := []record{{Own: w}}
	lines := []string{fmt.Sprintf("weighted %v: served %v of the first %d, shares %.3f, worst error %.1f %% (ok %v)",
		w.Weights, w.Served, c.Messages, w.Shares, 100*w.WorstError, w.OK)}
	for _, noWake := range []bool{false, true} {
		fmt.Fprintf(progress, "priority: strict, wake-ups %v\n", !noWake)
		s, err := strictWait(ctx, c, noWake)
		if err != nil {
			return recs, lines, err
		}
		recs = append(recs, record{Own: s})
		lines = append(lines, fmt.Sprintf("%s: high-level wait p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d, with %d handlers of %.0f ms busy (ok %v)",
			s.Variant, s.HighP50MS, s.HighP99MS, s.HighMaxMS, s.Highs, s.Handlers, s.HandlerMS, s.OK))
	}
	return recs, lines, nil
}

// weightedShares fills each queue far beyond what is counted, so that all
// stay saturated, and counts the first Messages handler calls.
func weightedShares(ctx context.Context, c priorityConfig) (priorityRecord, error) {
	members := make([]azdispatch.SetMember, len(c.Weights))
	sum := 0
	for i, w := range c.Weights {
		members[i].Weight = w
		sum += w
	}
	r, err := newSetRun("weighted", members, false, &azdispatch.QueueSetOptions{Order: azdispatch.WeightedShares})
	if err != nil {
		return priorityRecord{}, err
	}
	for i := range c.Weights {
		if err := r.send(ctx, i, c.Messages); err != nil {
			return priorityRecord{}, err
		}
	}
	runCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	wait, err := r.listen(runCtx, 0, &azdispatch.ListenerOptions{Concurrency: 16, Scaling: azdispatch.ScalingOptions{MaxDequeuers: 4}})
	if err != nil {
		return priorityRecord{}, err
	}
	reached := until(runCtx, func() bool { return r.total() >= c.Messages })
	stop()
	if err := wait(); err != nil {
		return priorityRecord{}, err
	}
	if reached != nil {
		return priorityRecord{}, fmt.Errorf("weighted: %d of %d handled in 2 minutes", r.total(), c.Messages)
	}
	served := r.first(c.Messages)
	rec := priorityRecord{Scenario: "priority", Variant: "weighted", Weights: c.Weights, OK: true}
	for i, w := range c.Weights {
		n := served[r.queues[i].Name()]
		share := float64(n) / float64(c.Messages)
		want := float64(w) / float64(sum)
		rec.Served = append(rec.Served, n)
		rec.Shares = append(rec.Shares, share)
		rec.WorstError = max(rec.WorstError, abs(share-want)/want)
	}
	rec.OK = rec.WorstError <= 0.05
	return rec, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// strictWait keeps every handler busy with a backlog on the low level, and
// sends one message to the high level every HighEvery: each should start
// within about one handler call's completion.
func strictWait(ctx context.Context, c priorityConfig, noWake bool) (priorityRecord, error) {
	variant := "strict"
	if noWake {
		variant = "strict-no-wake"
	}
	r, err := newSetRun(variant, make([]azdispatch.SetMember, 2), noWake, &azdispatch.QueueSetOptions{Order: azdispatch.StrictPriority})
	if err != nil {
		return priorityRecord{}, err
	}
	if err := r.send(ctx, 1, c.Backlog); err != nil {
		return priorityRecord{}, err
	}
	const concurrency, dequeuers = 16, 2
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	wait, err := r.listen(runCtx, c.Hold, &azdispatch.ListenerOptions{Concurrency: concurrency, Scaling: azdispatch.ScalingOptions{MinDequeuers: dequeuers, MaxDequeuers: dequeuers}})
	if err != nil {
		return priorityRecord{}, err
	}
	// Full first: every handler busy on the low level.
	_ = until(runCtx, func() bool { return r.total() >= concurrency*dequeuers })
	for range c.Highs {
		if err := r.send(ctx, 0, 1); err != nil {
			return priorityRecord{}, err
		}
		time.Sleep(c.HighEvery)
	}
	// The last ones, found late without wake-ups, within EmptySkip.
	deadline, cancel := context.WithTimeout(ctx, time.Minute)
	_ = until(deadline, func() bool { return len(r.waitsOf(0)) >= c.Highs })
	cancel()
	stop()
	if err := wait(); err != nil {
		return priorityRecord{}, err
	}
	ws := r.waitsOf(0)
	rec := priorityRecord{Scenario: "priority", Variant: variant, Highs: len(ws), HandlerMS: ms(c.Hold), Handlers: concurrency * dequeuers,
		HighP50MS: ms(durationQuantile(ws, 0.5)), HighP99MS: ms(durationQuantile(ws, 0.99)), HighMaxMS: ms(durationQuantile(ws, 1)),
		LowServed: r.first(r.total())[r.queues[1].Name()]}
	// With wake-ups: p99 under a second, every message found. Without,
	// the figure is stated, not judged: a level found empty is passed over
	// for EmptySkip (5 s) while another has messages.
	rec.OK = len(ws) == c.Highs && (noWake || durationQuantile(ws, 0.99) < time.Second)
	return rec, nil
}
