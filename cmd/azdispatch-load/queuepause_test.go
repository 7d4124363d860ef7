package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// Both variants, end to end, with a 2 s interval and an 8 s pause: three
// worker processes (this test binary again, through TestMain), an emulator an hour ahead of
// them and one an hour behind. Every threshold is an invariant with
// seconds of room: the bound on receives is the interval and 1.5 s (the
// machine may be loaded, and the race detector slows every step), the
// resume's the same; what is asserted beyond ok is what cannot vary.
func TestAPauseHoldsEveryWorkerAndEndsOnTheServicesClock(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	t.Parallel()
	cfg := queuePauseConfig{
		Interval: 2 * time.Second, Pause: 8 * time.Second, Slack: 1500 * time.Millisecond,
		WarmUp: time.Second, After: time.Second,
	}.withDefaults()
	require.NoError(t, cfg.check())
	for _, v := range queuePauseVariants(cfg.Skew) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			var progress bytes.Buffer
			rec, err := runQueuePauseVariant(t.Context(), cfg, v, &progress)
			line, _ := json.Marshal(rec)
			t.Logf("\n%s%s", progress.String(), line)
			require.NoError(t, err)
			assert.True(t, rec.OK, "failed: %v", rec.Failed)
			assert.Zero(t, rec.ReceivesSettled, "receives in the settled pause")
			assert.Zero(t, rec.Lost, "lost")
			assert.Zero(t, rec.Hidden, "hidden")
			assert.Positive(t, rec.Probes, "probes")
			assert.Positive(t, rec.Sent)
			assert.Len(t, rec.ResumeS, cfg.Workers)
		})
	}
}

// The judge, on logs written by hand: a pause returned at 10 s into the
// run and ending at 20 s, an interval of 2 s and 0.5 s of slack.
func TestThePauseJudgeHoldsTheWorkersToTheBound(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	plan := queuePausePlan{called: at(9.9), returned: at(10), until: at(20), serviceUntil: at(20).Add(time.Hour), interval: 2 * time.Second,
		slack: 500 * time.Millisecond, holdLong: 200 * time.Millisecond}
	rx := func(ss ...float64) []queuePauseRequest {
		var out []queuePauseRequest
		for _, s := range ss {
			out = append(out, queuePauseRequest{at: at(s), messages: 1})
		}
		return out
	}
	paused := []queuePauseStatus{{at: at(1), inFlight: 1}, {at: at(11), paused: true, until: plan.serviceUntil}, {at: at(20.05)}}
	good := queuePauseLog{
		receives: rx(5, 9.95, 12.4, 20.1, 21),
		reads:    []queuePauseRequest{{at: at(11)}, {at: at(13)}, {at: at(15)}, {at: at(21)}},
		calls: []queuePauseCall{
			{n: 1, start: at(9.8), end: at(10.05)}, // under way at the pause
			{n: 2, start: at(12.45), end: at(12.6)},
			{n: 3, start: at(20.2), end: at(20.3)},
		},
		statuses: paused,
	}
	late := queuePauseLog{
		receives: rx(13.4, 25), // past the bound, and resumed 5 s after the end
		calls:    []queuePauseCall{{n: 4, start: at(13.5), end: at(13.6)}},
		open:     map[int]time.Time{5: at(9.5)},                                                                               // under way at the pause, never ended
		statuses: []queuePauseStatus{{at: at(13.45), inFlight: 1}, {at: at(13.7)}, {at: at(14), paused: true, until: at(20)}}, // read on its own clock
	}
	probes := []queuePauseProbe{{count: 2, least: 2, most: 2, oldest: 5, oldestVisible: true}}

	var r queuePauseRecord
	judgeQueuePause(&r, plan, []queuePauseLog{good, good}, 3, probes)
	assert.True(t, r.OK, r.Failed)
	assert.Zero(t, r.ReceivesSettled)
	assert.Equal(t, 4, r.ReceivesInterval, "9.95 and 12.4, twice")
	assert.InDelta(t, 2.4, r.LatestReceiveS, 1e-9)
	assert.Equal(t, []float64{1, 1}, r.PausedSeenS)
	assert.InDeltaSlice(t, []float64{0.1, 0.1}, r.ResumeS, 1e-9)
	assert.InDeltaSlice(t, []float64{0.05, 0.05}, r.UnpausedSeenS, 1e-9)
	assert.Equal(t, []int{3, 3}, r.PauseReads)
	assert.Equal(t, 2, r.UnderWayAtPause)
	assert.InDelta(t, 50, r.LastOfThemMS, 1e-6)
	assert.Equal(t, 3, r.Handled)
	assert.Equal(t, 3, r.Repeated, "each message twice")

	r = queuePauseRecord{}
	hiddenProbe := queuePauseProbe{count: 3, least: 2, most: 2, oldest: 5}
	judgeQueuePause(&r, plan, []queuePauseLog{good, late}, 5, []queuePauseProbe{hiddenProbe})
	assert.False(t, r.OK)
	assert.Equal(t, 1, r.ReceivesSettled)
	assert.InDelta(t, 5, r.ResumeS[1], 1e-9)
	assert.InDelta(t, 4, r.PausedSeenS[1], 1e-9, "late")
	assert.Equal(t, 1, r.OtherPause, "an end an hour off")
	assert.Equal(t, 1, r.UnfinishedAtPause)
	assert.Equal(t, 1, r.StartsSettled, "13.5 is past the quiet point, 13.2")
	assert.Equal(t, 1, r.InHandSettled)
	assert.Equal(t, 1, r.Hidden, "one counted past what was left, and the oldest unseen")
	assert.Equal(t, 1, r.ProbesFailed)
	assert.Equal(t, 1, r.Lost, "message 5")
	assert.Len(t, r.Failed, 9, "%q", r.Failed)
}
