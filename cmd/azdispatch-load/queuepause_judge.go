package main

import (
	"fmt"
	"slices"
	"time"
)

// queuePauseRecord is one line of the pause scenario's -json output: a
// variant's figures, each threshold's, and ok when all held. Per-worker
// figures are lists, a worker's place each.
type queuePauseRecord struct {
	Scenario string   `json:"scenario"`
	Variant  string   `json:"variant"`
	OK       bool     `json:"ok"`
	Failed   []string `json:"failed,omitempty"` // the thresholds that did not hold

	Workers        int     `json:"workers"`
	ServiceOffsetS float64 `json:"service_clock_offset_s"` // the emulator's clock less the workers', as given to it
	LearnedOffsetS float64 `json:"learned_offset_s"`       // as the coordinator's client learned it from the Date headers
	ScaleIntervalS float64 `json:"scale_interval_s"`
	SlackS         float64 `json:"slack_s"`
	PauseS         float64 `json:"pause_s"`      // asked for
	PausedForS     float64 `json:"paused_for_s"` // from Pause's return to the pause's end on the service's clock
	PauseCallMS    float64 `json:"pause_call_ms"`

	// 1: no receive from Pause's return + interval + slack to the end.
	ReceivesSettled  int       `json:"receives_settled_pause"`
	ReceivesInterval int       `json:"receives_within_interval"`     // from the Pause call to the bound: allowed
	LatestReceiveS   float64   `json:"latest_receive_after_pause_s"` // the last receive before the end, after Pause returned
	LatestEachS      []float64 `json:"latest_receive_each_s"`
	PausedSeenS      []float64 `json:"paused_seen_after_s"`       // Pause's return to State.Paused holding; -1: never
	OtherPause       int       `json:"statuses_of_another_pause"` // State.Paused held with an end not the one written
	PauseReads       []int     `json:"pause_reads_while_paused"`

	// 2: handlers under way finish; every message is handled.
	UnderWayAtPause   int     `json:"handlers_under_way_at_pause"`
	UnfinishedAtPause int     `json:"of_them_unfinished"`
	LastOfThemMS      float64 `json:"last_of_them_ended_after_pause_ms"`
	Unfinished        int     `json:"handler_calls_unfinished"` // started and never ended well, whole run
	StartsSettled     int     `json:"handler_starts_settled_pause"`
	Sent              int     `json:"sent"`
	Handled           int     `json:"handled"`
	Lost              int     `json:"lost"`
	Repeated          int     `json:"repeated"`
	Left              int     `json:"left_in_queue"`

	// 3: nothing hidden while settled (see queuePauseProbe).
	Probes        int `json:"hidden_probes"`
	ProbesFailed  int `json:"hidden_probes_failed"`
	Hidden        int `json:"hidden_max"`
	InHandSettled int `json:"in_hand_settled_max"` // the workers' State.InFlight, summed

	// 4: each worker receives within interval + slack of the service's end.
	ResumeS       []float64 `json:"resume_after_expiry_s"`        // -1: none
	UnpausedSeenS []float64 `json:"unpaused_seen_after_expiry_s"` // -1: never

	DepthReads []int64 `json:"depth_reads_total"` // each worker's Transactions.Depth: its pause reads and its scaling's
	Requests   []int64 `json:"requests_total"`
}

// queuePausePlan is a pause as the coordinator made it, on the local
// clock, which the workers share.
type queuePausePlan struct {
	called, returned time.Time // the Pause call
	// until is the pause's end on the service's clock made local: its
	// PauseState.Until less the emulator's offset.
	until time.Time
	// serviceUntil is PauseState.Until itself: the end each listener
	// must read.
	serviceUntil              time.Time
	interval, slack, holdLong time.Duration
}

// pauseQuietMargin is how long after the last handler a receive before the
// bound can start has ended that the workers' deletes are taken as done.
const pauseQuietMargin = 500 * time.Millisecond

// settled is the bound after which no worker may receive until the end:
// each has read the pause by then.
func (p queuePausePlan) settled() time.Time { return p.returned.Add(p.interval + p.slack) }

// quiet is when the pause is settled and the last messages received
// before it have been handled and deleted.
func (p queuePausePlan) quiet() time.Time { return p.settled().Add(p.holdLong + pauseQuietMargin) }

// judgeQueuePause fills in r's figures from the workers' logs, the
// messages written (numbered 1 to sent) and the probes, and sets OK.
func judgeQueuePause(r *queuePauseRecord, plan queuePausePlan, logs []queuePauseLog, sent int, probes []queuePauseProbe) {
	r.PausedForS = plan.until.Sub(plan.returned).Seconds()
	r.PauseCallMS = ms(plan.returned.Sub(plan.called))
	for _, l := range logs {
		judgeWorker(r, plan, l)
	}
	r.LatestReceiveS = slices.Max(append([]float64{-1}, r.LatestEachS...))
	judgeMessages(r, plan, logs, sent)
	r.Probes = len(probes)
	for _, p := range probes {
		r.Hidden = max(r.Hidden, p.hidden())
		if !p.ok() {
			r.ProbesFailed++
		}
	}
	r.Failed = queuePauseThresholds(r, plan)
	r.OK = len(r.Failed) == 0
}

// judgeWorker adds one worker's receives, pause reads and statuses to r.
func judgeWorker(r *queuePauseRecord, plan queuePausePlan, l queuePauseLog) {
	latest, resume := -1.0, -1.0
	for _, rx := range l.receives {
		switch {
		case rx.at.Before(plan.called):
		case rx.at.Before(plan.settled()):
			r.ReceivesInterval++
		case rx.at.Before(plan.until):
			r.ReceivesSettled++
		case resume < 0:
			resume = rx.at.Sub(plan.until).Seconds()
		}
		if rx.at.Before(plan.until) {
			latest = rx.at.Sub(plan.returned).Seconds()
		}
	}
	reads := 0
	for _, rd := range l.reads {
		if !rd.at.Before(plan.called) && rd.at.Before(plan.until) {
			reads++
		}
	}
	for _, s := range l.statuses {
		if s.paused && !s.until.Equal(plan.serviceUntil) {
			r.OtherPause++
		}
	}
	seen, unseen := listenerPauseTransitions(l.statuses, plan)
	r.LatestEachS = append(r.LatestEachS, latest)
	r.ResumeS = append(r.ResumeS, resume)
	r.PausedSeenS = append(r.PausedSeenS, seen)
	r.UnpausedSeenS = append(r.UnpausedSeenS, unseen)
	r.PauseReads = append(r.PauseReads, reads)
	r.InHandSettled += mostInHandBetween(l.statuses, plan.quiet(), plan.until)
	if l.final != nil {
		r.DepthReads = append(r.DepthReads, l.final.Transactions.Depth)
		r.Requests = append(r.Requests, l.final.Transactions.Total())
	}
}

// judgeMessages adds the handler calls of every worker to r: those under
// way at the pause, those started in its settled part, and the messages
// handled, lost and handled again.
func judgeMessages(r *queuePauseRecord, plan queuePausePlan, logs []queuePauseLog, sent int) {
	r.Sent = sent
	handled := map[int]int{}
	for _, l := range logs {
		for _, c := range l.calls {
			if c.failed {
				r.Unfinished++
			} else {
				handled[c.n]++
			}
			judgeCallAtPause(r, plan, c.start, c.end, c.failed)
		}
		for _, start := range l.open {
			r.Unfinished++
			judgeCallAtPause(r, plan, start, time.Time{}, true)
		}
	}
	for n, k := range handled {
		if n >= 1 && n <= sent {
			r.Handled++
		}
		r.Repeated += k - 1
	}
	r.Lost = sent - r.Handled
}

// queuePauseThresholds returns the thresholds r's figures do not hold,
// each as a sentence; none if all hold.
func queuePauseThresholds(r *queuePauseRecord, plan queuePausePlan) []string {
	var failed []string
	check := func(holds bool, format string, args ...any) {
		if !holds {
			failed = append(failed, fmt.Sprintf(format, args...))
		}
	}
	limit := (plan.interval + plan.slack).Seconds()
	check(r.ReceivesSettled == 0, "%d receives later than %.1f s after Pause returned, before the end", r.ReceivesSettled, limit)
	for w := range r.ResumeS {
		check(r.PausedSeenS[w] >= 0, "worker %d: State.Paused never held", w)
		check(r.ResumeS[w] >= 0 && r.ResumeS[w] <= limit, "worker %d: first receive %.2f s after the end (at most %.1f)", w, r.ResumeS[w], limit)
	}
	check(r.OtherPause == 0, "%d statuses of a pause with another end than the one written", r.OtherPause)
	check(r.UnfinishedAtPause == 0, "%d of the %d handler calls under way at the pause did not finish", r.UnfinishedAtPause, r.UnderWayAtPause)
	check(r.Unfinished == 0, "%d handler calls did not end well", r.Unfinished)
	check(r.StartsSettled == 0, "%d handler calls started in the settled pause", r.StartsSettled)
	check(r.Lost == 0, "%d messages never handled", r.Lost)
	check(r.Probes > 0, "no probe for hidden messages: the settled pause was too short")
	check(r.ProbesFailed == 0, "%d of %d probes found messages hidden or gone (at most %d hidden)", r.ProbesFailed, r.Probes, r.Hidden)
	check(r.InHandSettled == 0, "the workers held up to %d messages in the settled pause", r.InHandSettled)
	return failed
}

// judgeCallAtPause counts a handler call under way when Pause was called,
// and whether it finished; end is zero for a call that never ended.
func judgeCallAtPause(r *queuePauseRecord, plan queuePausePlan, start, end time.Time, failed bool) {
	if !start.Before(plan.quiet()) && start.Before(plan.until) {
		r.StartsSettled++
	}
	if !start.Before(plan.called) || (!end.IsZero() && end.Before(plan.called)) {
		return
	}
	r.UnderWayAtPause++
	if failed || end.IsZero() {
		r.UnfinishedAtPause++
		return
	}
	r.LastOfThemMS = max(r.LastOfThemMS, ms(end.Sub(plan.returned)))
}

// listenerPauseTransitions returns, from a worker's statuses, how long after
// Pause returned its listener's pause first held, and how long after the
// end it first did not again; -1 for a transition never seen.
func listenerPauseTransitions(statuses []queuePauseStatus, plan queuePausePlan) (seen, unseen float64) {
	seen, unseen = -1, -1
	var on time.Time
	for _, s := range statuses {
		switch {
		case s.at.Before(plan.called):
		case on.IsZero() && s.paused:
			on = s.at
			seen = s.at.Sub(plan.returned).Seconds()
		case !on.IsZero() && !s.paused:
			return seen, s.at.Sub(plan.until).Seconds()
		}
	}
	return seen, unseen
}

// mostInHandBetween is the most messages a worker said it held from quiet to
// until: the status in force at quiet, and every one after it.
func mostInHandBetween(statuses []queuePauseStatus, quiet, until time.Time) int {
	most := 0
	for i, s := range statuses {
		inForce := !s.at.After(quiet) && (i+1 == len(statuses) || statuses[i+1].at.After(quiet))
		if inForce || (s.at.After(quiet) && s.at.Before(until)) {
			most = max(most, s.inFlight)
		}
	}
	return most
}
