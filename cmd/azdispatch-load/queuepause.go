package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The pause scenario shows a queue's pause (Queue.Pause) holding a fleet:
// three listener processes on one queue, a steady trickle of messages
// before, during and after the pause, and an emulator whose clock is an
// hour away from theirs. Once Pause returns, no worker receives later
// than a scale interval and a little slack until the pause ends; handlers
// under way finish; nothing is left hidden; and when the pause ends on the
// service's clock, every worker receives again within an interval, as
// the workers' own clocks would not have it. It runs twice: the service's
// clock an hour ahead of the workers' (a listener that judged the end on
// its own clock would stay paused an hour), and an hour behind (one would
// never find the queue paused at all). It always runs on private
// emulators, whose clocks it moves; -duration sets the pause.

// queuePauseConfig sizes the pause scenario; the zero value is its
// defaults, and a test shortens them.
type queuePauseConfig struct {
	Workers  int           // listener processes
	Interval time.Duration // their ScalingOptions.ScaleInterval; the library's default, 10 s
	Pause    time.Duration // the pause's length
	// Slack is how much later than Pause's return plus Interval a receive
	// may start. A dequeuer that has passed the pause's gate before the
	// gate's reading turned stale may start its receive a little after:
	// the reading it went by was stamped when its answer came, not when
	// the service read the queue; while one dequeuer reads the pause
	// again, the others go on by the last reading for that read's time;
	// and a dequeuer past the gate may wait for free handler slots before
	// it asks. The first two are round trips on loopback (milliseconds,
	// tens loaded), the third at most a handler call (HoldMax): 1 s is
	// several times their sum.
	Slack            time.Duration
	Rate             float64       // messages a second the trickle sends
	HoldMin, HoldMax time.Duration // a handler call's time, drawn between them
	Skew             time.Duration // how far the emulator's clock is from the workers'
	WarmUp           time.Duration // the least time all workers receive before the pause
	After            time.Duration // the trickle's time after each worker's resume has been given its bound
}

func (c queuePauseConfig) withDefaults() queuePauseConfig {
	setIf(&c.Workers, 3)
	setIf(&c.Interval, 10*time.Second)
	setIf(&c.Pause, 30*time.Second)
	setIf(&c.Slack, time.Second)
	setIf(&c.Rate, 20)
	setIf(&c.HoldMin, 50*time.Millisecond)
	setIf(&c.HoldMax, 200*time.Millisecond)
	setIf(&c.Skew, time.Hour)
	setIf(&c.WarmUp, 3*time.Second)
	setIf(&c.After, 3*time.Second)
	return c
}

// pauseProbeLead is how long before the pause's end the probes for hidden
// messages stop, so that none straddles the end.
const pauseProbeLead = 500 * time.Millisecond

// check refuses a pause too short to have a settled part to probe: the
// service rounds its end up to a second from a start it knows to the
// second, so it lasts at least Pause less a second.
func (c queuePauseConfig) check() error {
	need := c.Interval + c.Slack + c.HoldMax + pauseQuietMargin + pauseProbeLead + time.Second
	if c.Pause-time.Second < need {
		return fmt.Errorf("a pause of %v leaves no settled part to look at with an interval of %v: give at least %v", c.Pause, c.Interval, need+time.Second)
	}
	if c.Rate <= 0 || c.HoldMin > c.HoldMax {
		return fmt.Errorf("rate %v, hold %v to %v: need a positive rate and a hold range", c.Rate, c.HoldMin, c.HoldMax)
	}
	return nil
}

// queuePauseVariant is where the emulator's clock is.
type queuePauseVariant struct {
	name   string
	offset time.Duration // the service's clock less the workers'
}

func queuePauseVariants(skew time.Duration) []queuePauseVariant {
	return []queuePauseVariant{{"service-clock-ahead", skew}, {"service-clock-behind", -skew}}
}

// runQueuePause runs both variants. A variant whose thresholds do not all
// hold is printed, and fails the run.
func runQueuePause(ctx context.Context, o options, progress io.Writer) ([]record, []string, error) {
	cfg := queuePauseConfig{Pause: o.duration}.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
	var recs []record
	var lines []string
	var failed []error
	for _, v := range queuePauseVariants(cfg.Skew) {
		fmt.Fprintf(progress, "pause: %s by %v, %d workers, interval %v, pause %v\n", v.name, cfg.Skew, cfg.Workers, cfg.Interval, cfg.Pause)
		r, err := runQueuePauseVariant(ctx, cfg, v, progress)
		if err != nil {
			return recs, lines, fmt.Errorf("%s: %w", v.name, err)
		}
		if !r.OK {
			failed = append(failed, fmt.Errorf("%s: %s", v.name, strings.Join(r.Failed, "; ")))
		}
		recs = append(recs, record{Scenario: "pause", Variant: v.name, Own: r})
		lines = append(lines, queuePauseLine(r))
	}
	return recs, lines, errors.Join(failed...)
}

// queuePauseLine is a variant's line in the table.
func queuePauseLine(r queuePauseRecord) string {
	return fmt.Sprintf("%s: %d receives in the settled pause (last %.2f s after Pause returned, bound %.1f s), resumed %s s after the end, %d hidden in %d probes, %d sent, %d handled, %d lost, pause reads %v, ok %v",
		r.Variant, r.ReceivesSettled, r.LatestReceiveS, r.ScaleIntervalS+r.SlackS, secondsList(r.ResumeS), r.Hidden, r.Probes, r.Sent, r.Handled, r.Lost, r.PauseReads, r.OK)
}

// secondsList lists xs to two places, slash-separated.
func secondsList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, "/")
}
