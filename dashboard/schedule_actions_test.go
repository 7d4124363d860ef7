package dashboard_test

import (
	"context"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/memqueue"
)

// scheduled returns a memqueue whose payload store holds the record of an
// hourly schedule, "hourly-report", written by a scheduler that has
// stopped since: nothing sends it while the test runs.
func scheduled(t *testing.T, name string) *memqueue.Queue {
	t.Helper()
	q := memqueue.New(name, nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "test", Logger: slog.New(slog.DiscardHandler)})
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
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1 && !states[0].Next.IsZero()
	}, 30*time.Second, 10*time.Millisecond, "the schedule's record")
	cancel()
	require.NoError(t, <-done)
	return q
}

// scheduleOf is the state of the schedule, as its store has it.
func scheduleOf(t *testing.T, q *memqueue.Queue) azdispatch.ScheduleState {
	t.Helper()
	states, err := q.PayloadStore().Schedules(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1)
	return states[0]
}

// scheduleRowOf is the schedules page's row of the schedule, as text.
func scheduleRowOf(t *testing.T, body string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-name="hourly-report"[^>]*>.*?</tr>`).FindString(body)
	require.NotEmpty(t, row, "no row for the schedule")
	return html.UnescapeString(row)
}

func scheduleForm(do, queue string, more ...string) url.Values {
	f := url.Values{"do": {do}, "confirm": {"yes"}, "queue": {queue}, "name": {"hourly-report"}}
	for i := 0; i+1 < len(more); i += 2 {
		f.Set(more[i], more[i+1])
	}
	return f
}

// The schedules page offers a pause, a resume and a run now, each through
// its confirmation (a GET that changes nothing), and shows what each did.
func TestPauseResumeAndRunAScheduleThroughTheConfirmation(t *testing.T) {
	t.Parallel()
	q := scheduled(t, "orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	before := scheduleOf(t, q)

	_, _, body := get(t, srv, "schedules")
	row := scheduleRowOf(t, body)
	assert.Contains(t, row, "not paused")
	assert.Contains(t, row, "none asked")
	assert.Contains(t, row, `href="confirm?do=schedule-pause&queue=orders&name=hourly-report"`)
	assert.Contains(t, row, `href="confirm?do=schedule-run&queue=orders&name=hourly-report"`)

	for _, do := range []string{"schedule-pause", "schedule-resume", "schedule-run"} {
		status, _, body := get(t, srv, "confirm?do="+do+"&queue=orders&name=hourly-report")
		require.Equal(t, http.StatusOK, status, do)
		assert.Contains(t, body, `method="post" action="act"`, do)
		assert.Contains(t, body, `<input type="hidden" name="name" value="hourly-report">`, do)
		assert.Contains(t, body, "By the last reading: not paused; run now: none asked.", do)
		assert.Equal(t, strings.Contains(body, `<select name="duration">`), do == "schedule-pause", do)
	}
	assert.Equal(t, before, scheduleOf(t, q), "a confirmation changes nothing")

	status, hd, _ := post(t, srv, scheduleForm("schedule-pause", "orders", "duration", "4h", "by", "ana: the report is wrong"))
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "schedules?done=schedule-paused", hd.Get("Location"))
	st := scheduleOf(t, q)
	assert.Equal(t, "ana: the report is wrong", st.Paused.By)
	assert.WithinRange(t, st.Paused.Until, st.Paused.Since.Add(4*time.Hour), st.Paused.Since.Add(4*time.Hour+3*time.Second), "at least the pause asked, to the second")
	_, _, body = get(t, srv, "schedules?done=schedule-paused")
	assert.Contains(t, body, "The schedule is paused")
	row = scheduleRowOf(t, body)
	assert.Contains(t, row, "paused by ana: the report is wrong until "+st.Paused.Until.UTC().Format("2006-01-02 15:04:05Z"))
	assert.Contains(t, row, `href="confirm?do=schedule-resume&queue=orders&name=hourly-report"`)
	assert.NotContains(t, row, "do=schedule-pause")

	status, hd, _ = post(t, srv, scheduleForm("schedule-resume", "orders"))
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "schedules?done=schedule-resumed", hd.Get("Location"))
	assert.False(t, scheduleOf(t, q).Paused.Active(q.ServiceTime()))
	_, _, body = get(t, srv, "schedules")
	assert.Contains(t, scheduleRowOf(t, body), "not paused")

	status, hd, _ = post(t, srv, scheduleForm("schedule-run", "orders"))
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "schedules?done=schedule-run", hd.Get("Location"))
	st = scheduleOf(t, q)
	require.False(t, st.RunNow.IsZero())
	_, _, body = get(t, srv, "schedules?done=schedule-run")
	assert.Contains(t, body, "A run now is asked")
	assert.Contains(t, scheduleRowOf(t, body), "asked at "+st.RunNow.UTC().Format("2006-01-02 15:04:05Z")+", waiting for a scheduler")
}

// What a schedule action is refused for: a duration or "paused by" a
// pause cannot take, a schedule no scheduler started, a cross-origin post;
// and a change storage refuses says why. Nothing changes.
func TestAScheduleActionIsRefusedOrFailsSayingWhy(t *testing.T) {
	t.Parallel()
	q := scheduled(t, "orders")
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	before := scheduleOf(t, q)
	cases := []struct {
		form   url.Values
		status int
		says   string
	}{
		{scheduleForm("schedule-pause", "orders", "duration", "3h", "by", "ops"), http.StatusBadRequest, "a pause lasts one of"},
		{scheduleForm("schedule-pause", "orders", "duration", "1h", "by", strings.Repeat("x", 257)), http.StatusBadRequest, "at most 256 bytes"},
		{scheduleForm("schedule-pause", "elsewhere", "duration", "1h"), http.StatusNotFound, "There is no schedule hourly-report of queue elsewhere: no scheduler has started it. Nothing changed."},
		{scheduleForm("schedule-run", "elsewhere"), http.StatusNotFound, "no scheduler has started it"},
		{url.Values{"do": {"schedule-run"}, "confirm": {"yes"}, "queue": {"orders"}}, http.StatusBadRequest, "There is no such schedule."},
	}
	for _, c := range cases {
		status, _, body := post(t, srv, c.form)
		assert.Equal(t, c.status, status, c.form.Encode())
		assert.Contains(t, html.UnescapeString(body), c.says, c.form.Encode())
	}

	req, err := http.NewRequest(http.MethodPost, srv.URL+prefix+"/act", strings.NewReader(scheduleForm("schedule-run", "orders").Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	q.FailNext(memqueue.OpBlobWrite, 1, nil) // 503 ServerBusy
	status, _, body := post(t, srv, scheduleForm("schedule-run", "orders"))
	assert.Equal(t, http.StatusBadGateway, status)
	assert.Regexp(t, `The change of the schedule failed: .*blob write on blob "[^"]+": 503 ServerBusy \(throttled\)`, html.UnescapeString(body))
	assert.Equal(t, before, scheduleOf(t, q), "nothing changed")
}

// Read-only, the schedules page shows the pause and the run now but
// offers no action, and a forged post is refused.
func TestAReadOnlySchedulesPageOffersNoAction(t *testing.T) {
	t.Parallel()
	q := scheduled(t, "orders")
	_, err := q.PayloadStore().PauseSchedule(context.Background(), "orders", "hourly-report", time.Hour, &azdispatch.PauseOptions{By: "ops"})
	require.NoError(t, err)
	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	_, _, body := get(t, srv, "schedules")
	row := scheduleRowOf(t, body)
	assert.Contains(t, row, "paused by ops until")
	assert.NotContains(t, row, "confirm?")
	assert.NotContains(t, body, ">Actions</th>")
	status, _, _ := post(t, srv, scheduleForm("schedule-resume", "orders"))
	assert.Equal(t, http.StatusForbidden, status)
	assert.True(t, scheduleOf(t, q).Paused.Active(q.ServiceTime()), "still paused")
}

// An ended schedule offers no run now, and one posted anyway is refused
// as such.
func TestAnEndedScheduleCannotRunNow(t *testing.T) {
	t.Parallel()
	q := memqueue.New("orders", nil)
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: "test", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Add(azdispatch.Schedule[string]{
		Name: "hourly-report",
		// One occurrence, a second from now, then no more.
		Next: func(after time.Time) time.Time {
			if after.IsZero() {
				return time.Now().Add(time.Second)
			}
			return time.Time{}
		},
		Messages: func(context.Context, azdispatch.Occurrence) ([]string, error) { return []string{"once"}, nil },
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1 && states[0].Ended
	}, 30*time.Second, 10*time.Millisecond, "the schedule ends")
	cancel()
	require.NoError(t, <-done)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, Write: true})
	_, _, body := get(t, srv, "schedules")
	assert.NotContains(t, scheduleRowOf(t, body), "do=schedule-run")
	status, _, body := post(t, srv, scheduleForm("schedule-run", "orders"))
	assert.Equal(t, http.StatusConflict, status)
	assert.Contains(t, body, "has ended")
}
