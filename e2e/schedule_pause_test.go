package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
)

// scheduleState is the hourly schedule's state, as its store has it.
func scheduleState(t *testing.T, q *azdispatch.Queue) azdispatch.ScheduleState {
	t.Helper()
	states, err := q.PayloadStore().Schedules(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	return states[0]
}

// An operator pauses a schedule from the schedules page, resumes it, and
// asks for a run now, each through its confirmation; the page shows each
// change, the store has it, and a scheduler started afterwards sends the
// occurrence asked for.
func TestPauseResumeAndRunAScheduleInABrowser(t *testing.T) {
	b := newBrowser(t) // first: without Chromium, fail before starting Azurite
	emulator := azuritetest.Start(t, nil)
	ctx := context.Background()
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue(unique("reports"))
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))
	recordSchedule(t, q) // "hourly-report", whose scheduler has stopped

	s := newSite(t, &dashboard.Options{
		Sources:  []azdispatch.Source{q},
		CacheFor: time.Second,
		Refresh:  -1, // nothing moves under the clicks
		Write:    true,
	})
	b.takeProblems()
	row := `tr[data-name="hourly-report"]`
	text := func(cell string) string {
		return eval[string](t, b, fmt.Sprintf(`document.querySelector('%s td.%s').innerText`, row, cell))
	}
	confirm := func(button string) {
		t.Helper()
		b.do(t, chromedp.Click(chromedp.CSS(row+" a.button."+button)), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
		b.waitTrue(t, `document.activeElement.matches("a.cancel")`) // the keyboard starts on Cancel (autofocus comes after the load)
	}
	submit := func() {
		t.Helper()
		b.do(t, chromedp.Click(chromedp.CSS(`form.confirm button[type="submit"]`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	}

	// Pause, for four hours, saying why.
	b.do(t, chromedp.Navigate(s.url+"schedules"), chromedp.WaitVisible(chromedp.CSS(row+" a.button.pause")))
	assert.Contains(t, text("pause"), "not paused")
	before := scheduleState(t, q)
	confirm("pause")
	assert.Contains(t, eval[string](t, b, `document.querySelector("p.matching").innerText`), "By the last reading: not paused")
	assert.Equal(t, before, scheduleState(t, q), "the confirmation changed nothing")
	choose(t, b, `form.confirm select[name="duration"]`, "4h")
	retype(t, b, `form.confirm input[name="by"]`, "ana: the report is wrong")
	screenshot(t, b, "schedule-pause-confirm")
	submit()
	st := scheduleState(t, q)
	assert.Equal(t, "ana: the report is wrong", st.Paused.By)
	assert.WithinRange(t, st.Paused.Until, st.Paused.Since.Add(4*time.Hour), st.Paused.Since.Add(4*time.Hour+3*time.Second), "at least the pause asked, to the second")
	assert.Contains(t, text("pause"), "paused by ana: the report is wrong until "+stampOf(st.Paused.Until))
	screenshot(t, b, "schedules-paused")

	// Resume.
	confirm("resume")
	submit()
	assert.False(t, scheduleState(t, q).Paused.Active(q.ServiceTime()))
	assert.Contains(t, text("pause"), "not paused")

	// Run now: asked, and waiting, as no scheduler runs.
	confirm("run-now")
	submit()
	st = scheduleState(t, q)
	require.False(t, st.RunNow.IsZero())
	assert.Contains(t, text("run-now"), "asked at "+stampOf(st.RunNow)+", waiting for a scheduler")
	screenshot(t, b, "schedules-run-now")

	// A scheduler started now sends it.
	sched := startScheduler(t, q)
	require.Eventually(t, func() bool {
		st := scheduleState(t, q)
		return st.RunNow.IsZero() && !st.LastRunNow.IsZero()
	}, patience, 50*time.Millisecond, "a scheduler sends the run now")
	sched()
	sent, err := q.Peek(ctx, azdispatch.MaxBatch)
	require.NoError(t, err)
	require.Len(t, sent, 1)
	assert.Contains(t, sent[0].Text, "report")
	// The page shows it once its shared reading is taken again (within
	// CacheFor): load it until it does.
	sentWords := "the last one, asked at " + stampOf(st.RunNow) + ", was sent"
	for deadline := time.Now().Add(patience); ; {
		b.do(t, chromedp.Navigate(s.url+"schedules"), chromedp.WaitVisible(chromedp.CSS(row)))
		if strings.Contains(text("run-now"), sentWords) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the page never showed the run now sent: %q", text("run-now"))
		time.Sleep(200 * time.Millisecond)
	}

	assert.Empty(t, b.takeProblems())
	s.checkPaths(t)
}

// startScheduler runs the hourly schedule's scheduler over q again, and
// returns what stops it.
func startScheduler(t *testing.T, q *azdispatch.Queue) (stop func()) {
	t.Helper()
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "e2e-again"})
	require.NoError(t, err)
	require.NoError(t, s.Add(azdispatch.Schedule[string]{
		Name:  "hourly-report",
		Every: time.Hour,
		Messages: func(context.Context, azdispatch.Occurrence) ([]string, error) {
			return []string{"report"}, nil
		},
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return stop
}
