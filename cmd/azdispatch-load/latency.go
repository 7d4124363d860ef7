package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"
)

// The latency scenario: how long messages wait in the queue when handlers
// are heavy (seconds each, few at once per dequeuer), under the default
// scaling (ScaleByDepth(BatchSize): one dequeuer per 32 messages of depth,
// which counts batches, not handler time) and under
// ListenerOptions.Scaling.TargetWait. It runs over memqueue on the real clock, so
// that it measures the listener's scaling and not an emulator, with a
// delay added to every request for the round trip to storage. Both
// variants get the same seeded arrivals: a steady Poisson stream with
// bursts on top, a warm-up that is not measured, then the measured window,
// after which each variant drains before its figures are taken.

// latencyConfig is the latency scenario's workload and listener shape.
type latencyConfig struct {
	Rate         float64       // steady arrivals per second, Poisson
	Burst        int           // messages sent at once, every BurstEvery
	BurstEvery   time.Duration // the first comes half of it into the window
	Handler      time.Duration // each handler call's time, sleeping on its context
	Concurrency  int           // ListenerOptions.Concurrency: heavy handlers, few per dequeuer
	MaxDequeuers int
	Target       time.Duration // ListenerOptions.Scaling.TargetWait of the target variant
	Warmup       time.Duration // steady arrivals before the window, not measured
	Duration     time.Duration // the measured window of each variant
	// Wake sends through the listener's own queue, which wakes its idle
	// dequeuers on every send (a publisher in the same process); by
	// default the listener does not hear of sends (publishers elsewhere)
	// and finds messages by polling.
	Wake bool
	// Drain bounds the wait, after the window, for every message to be
	// handled: a variant that cannot drain is a failure, not a figure.
	Drain time.Duration
}

// latencyDefaults make both variants together take about two and a half
// minutes. The steady stream (15 a second of 1.5 s each) keeps 22.5
// handlers busy, 6 dequeuers of 4, and the bursts (40 every 20 s) bring
// the mean to 25.5 of the 32 handlers MaxDequeuers allows. ScaleByDepth
// asks for a sixth dequeuer only past 160 messages of depth, so it gets
// there through a backlog; the target asks for what the rate needs, and
// for 8 dequeuers to receive a burst within 5 s.
//
// The fleet is kept busy on purpose: a dequeuer with free slots polls, and
// a listener scales down only as its idle dequeuers reach the end of the
// idle curve, so at lighter loads the target variant's spare dequeuers
// cost empty receives. With -latency-rate 6 -latency-burst 60 (42% of the
// handlers busy) it kept under the target as well, but at about 1.17
// times depth's requests per message, and 1.07 to 1.13 at
// -latency-rate 10. Nearer saturation (-latency-rate 16) its own share
// over the target rose to between 0.05 and 0.28.
func latencyDefaults() latencyConfig {
	return latencyConfig{
		Rate: 15, Burst: 40, BurstEvery: 20 * time.Second, Handler: 1500 * time.Millisecond,
		Concurrency: 4, MaxDequeuers: 8, Target: 5 * time.Second,
		Warmup: 10 * time.Second, Duration: 60 * time.Second, Drain: 2 * time.Minute,
	}
}

// latencyRequest is the delay added to every request when -latency is not
// given: a storage round trip.
const latencyRequest = 20 * time.Millisecond

// latencyFlags registers the scenario's own flags on fs; the config they
// fill is read after fs is parsed.
func latencyFlags(fs *flag.FlagSet) *latencyConfig {
	c := latencyDefaults()
	fs.Float64Var(&c.Rate, "latency-rate", c.Rate, "latency scenario: steady arrivals per second (Poisson)")
	fs.IntVar(&c.Burst, "latency-burst", c.Burst, "latency scenario: messages sent at once every -latency-burst-every")
	fs.DurationVar(&c.BurstEvery, "latency-burst-every", c.BurstEvery, "latency scenario: time between bursts")
	fs.DurationVar(&c.Handler, "latency-handler", c.Handler, "latency scenario: how long each handler call takes")
	fs.IntVar(&c.Concurrency, "latency-concurrency", c.Concurrency, "latency scenario: ListenerOptions.Concurrency")
	fs.IntVar(&c.MaxDequeuers, "latency-max-dequeuers", c.MaxDequeuers, "latency scenario: ListenerOptions.Scaling.MaxDequeuers")
	fs.DurationVar(&c.Target, "latency-target", c.Target, "latency scenario: ListenerOptions.Scaling.TargetWait of the target variant")
	fs.DurationVar(&c.Warmup, "latency-warmup", c.Warmup, "latency scenario: steady arrivals before the measured window")
	fs.BoolVar(&c.Wake, "latency-wake", c.Wake, "latency scenario: send through the listener's own queue, waking it on every send")
	return &c
}

// latencyRecord is one line of -json output for the latency scenario.
type latencyRecord struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`

	Messages   int     `json:"messages"` // sent in the measured window, all handled
	P50S       float64 `json:"p50_s"`    // time in queue, first deliveries
	P99S       float64 `json:"p99_s"`
	MaxS       float64 `json:"max_s"`
	OverTarget float64 `json:"over_target"` // share of Messages that waited longer than the target
	TxPerMsg   float64 `json:"tx_per_msg"`  // every request on the queue, sends included, per message handled
	// ListenerTxPerMsg leaves the sends out: what the listener spent.
	ListenerTxPerMsg float64 `json:"listener_tx_per_msg"`
	EmptyReceives    int64   `json:"empty_receives"`
	MaxDequeuersSeen int     `json:"max_dequeuers_seen"`
	MeanDequeuers    float64 `json:"mean_dequeuers"` // sampled over the window
	ScaleUps         int64   `json:"scale_ups"`
	DrainS           float64 `json:"drain_s"` // from the window's end until every message was handled

	Seed         int64   `json:"seed"`
	RatePerS     float64 `json:"rate_per_s"`
	Burst        int     `json:"burst"`
	BurstEveryS  float64 `json:"burst_every_s"`
	HandlerS     float64 `json:"handler_s"`
	Concurrency  int     `json:"concurrency"`
	MaxDequeuers int     `json:"max_dequeuers"`
	TargetS      float64 `json:"target_s"`
	WarmupS      float64 `json:"warmup_s"`
	DurationS    float64 `json:"duration_s"`
	LatencyMS    float64 `json:"latency_ms"`
	Wake         bool    `json:"wake"`

	// Ratios, on the target variant's record: its figures ÷ depth's
	// (left out when depth's is zero).
	Ratios map[string]float64 `json:"ratios,omitempty"`
}

func runLatency(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	cfg := latencyDefaults()
	if o.wait != nil {
		cfg = *o.wait
	}
	if o.duration > 0 {
		cfg.Duration = o.duration
	}
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
	perRequest := o.latency
	if perRequest == 0 {
		perRequest = latencyRequest
	}
	seed := soakSeed(o)
	arrivals := latencyArrivals(cfg, seed)
	fmt.Fprintf(progress, "latency: seed %d (replay with -seed %d), %d messages per variant, %d of them in the %v window\n",
		seed, seed, len(arrivals), measuredCount(arrivals), cfg.Duration)
	// The two ways to scale, one after the other: each gets its own
	// listener and queue, and the same arrivals.
	var recs []latencyRecord
	for _, v := range []string{"depth", "target"} {
		r, err := latencyOnce(ctx, cfg, perRequest, arrivals, v == "target", progress)
		if err != nil {
			return nil, nil, fmt.Errorf("latency %s: %w", v, err)
		}
		rec := r.record(cfg, v, seed, perRequest)
		fmt.Fprintf(progress, "latency %-6s p50 %.0fs p99 %.0fs over target %.3f, %.3f tx/msg, dequeuers mean %.1f max %d\n",
			v, rec.P50S, rec.P99S, rec.OverTarget, rec.TxPerMsg, rec.MeanDequeuers, rec.MaxDequeuersSeen)
		recs = append(recs, rec)
	}
	depth, target := &recs[0], &recs[1]
	target.Ratios = map[string]float64{}
	for name, pair := range map[string][2]float64{
		"over_target_target_over_depth": {target.OverTarget, depth.OverTarget},
		"tx_per_msg_target_over_depth":  {target.TxPerMsg, depth.TxPerMsg},
		"p99_target_over_depth":         {target.P99S, depth.P99S},
	} {
		if pair[1] > 0 { // JSON has no Inf
			target.Ratios[name] = pair[0] / pair[1]
		}
	}
	out := make([]record, len(recs))
	for i, r := range recs {
		out[i] = record{Scenario: "latency", Variant: r.Variant, Own: r}
	}
	return out, latencyLines(cfg, recs), nil
}

// check refuses a workload the scenario cannot run.
func (c latencyConfig) check() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("latency: rate %v must be positive", c.Rate)
	case c.Burst < 0 || c.BurstEvery <= 0:
		return fmt.Errorf("latency: burst %d every %v: need a burst of 0 or more at a positive interval", c.Burst, c.BurstEvery)
	case c.Handler < 0 || c.Warmup < 0 || c.Duration <= 0 || c.Drain <= 0:
		return fmt.Errorf("latency: handler %v, warm-up %v, window %v, drain %v: need positive times", c.Handler, c.Warmup, c.Duration, c.Drain)
	case c.Concurrency < 1 || c.MaxDequeuers < 1 || c.Target <= 0:
		return fmt.Errorf("latency: concurrency %d, max dequeuers %d, target %v: need positive values", c.Concurrency, c.MaxDequeuers, c.Target)
	}
	return nil
}

// latencyLines are the table: one row per variant, then target ÷ depth.
func latencyLines(c latencyConfig, recs []latencyRecord) []string {
	r0 := recs[0]
	lines := []string{
		fmt.Sprintf("%.0f msgs/s steady + %d every %v, handler %v, concurrency %d, max dequeuers %d, target %v, %.0f ms per request, wake %v",
			c.Rate, c.Burst, c.BurstEvery, c.Handler, c.Concurrency, c.MaxDequeuers, c.Target, r0.LatencyMS, c.Wake),
		fmt.Sprintf("%v measured after %v of warm-up, seed %d; time in queue of first deliveries, whole seconds", c.Duration, c.Warmup, r0.Seed),
		fmt.Sprintf("%-8s %8s %6s %6s %6s %11s %7s %10s %9s %8s %7s",
			"variant", "messages", "p50_s", "p99_s", "max_s", "over_target", "tx/msg", "listener/m", "deq mean", "deq max", "empty"),
	}
	for _, r := range recs {
		lines = append(lines, fmt.Sprintf("%-8s %8d %6.0f %6.0f %6.0f %11.3f %7.3f %10.3f %9.2f %8d %7d",
			r.Variant, r.Messages, r.P50S, r.P99S, r.MaxS, r.OverTarget, r.TxPerMsg, r.ListenerTxPerMsg,
			r.MeanDequeuers, r.MaxDequeuersSeen, r.EmptyReceives))
	}
	ratio := func(name string) string {
		if v, ok := recs[1].Ratios[name]; ok {
			return fmt.Sprintf("%.3f", v)
		}
		return "n/a (depth's is 0)"
	}
	return append(lines,
		"Target ÷ depth over_target: "+ratio("over_target_target_over_depth"),
		"Target ÷ depth tx/msg:      "+ratio("tx_per_msg_target_over_depth"))
}
