package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// schedules pause, resume and run change the schedule's state as a
// Scheduler's own methods would, print it after, and refuse what they
// cannot do with the library's error.
func TestSchedulesPauseResumeAndRun(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	ctx := context.Background()
	acct, err := azdispatch.NewAccountFromConnectionString(conn, nil)
	require.NoError(t, err)
	container := uniqueName(t)
	store, err := acct.PayloadStore(container)
	require.NoError(t, err)
	q := createdQueue(t, conn)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Payloads: store})
	require.NoError(t, err)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Add(azdispatch.Schedule[string]{Name: "daily", Cron: "0 3 * * *",
		Messages: func(context.Context, azdispatch.Occurrence) ([]string, error) { return []string{"report"}, nil }}))
	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- s.Run(runCtx) }()
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1
	}, time.Minute, 100*time.Millisecond, "the schedule's state written")
	stop()
	require.NoError(t, <-ended) // the commands need no scheduler running

	on := []string{"-queue", q.Name(), "-payload-container", container, "-name", "daily"}
	var v scheduleView
	r := runJSON(t, env, exitOK, &v, append([]string{"schedules", "pause", "-for", "2h", "-by", "ops: warehouse migration"}, on...)...)
	require.NotNil(t, v.PausedUntil, r)
	require.NotNil(t, v.PausedSince, r)
	assert.WithinRange(t, *v.PausedUntil, v.PausedSince.Add(2*time.Hour), v.PausedSince.Add(2*time.Hour+3*time.Second), "at least the pause asked, to the second")
	assert.Equal(t, "ops: warehouse migration", v.PausedBy)
	states, err := s.States(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ops: warehouse migration", states[0].Paused.By, "kept in the schedule's state")

	r = run(t, env, "", append([]string{"schedules"}, on[:4]...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "PAUSED UNTIL")
	assert.Contains(t, r.stdout, v.PausedUntil.Format(time.RFC3339))

	r = runJSON(t, env, exitOK, &v, append([]string{"schedules", "run"}, on...)...)
	require.NotNil(t, v.RunNow, "a run-now waits for a scheduler: %s", r)
	r = run(t, env, "", append([]string{"schedules", "resume"}, on...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "RUN NOW ASKED")
	states, err = s.States(ctx)
	require.NoError(t, err)
	assert.False(t, states[0].Paused.Active(time.Now().Add(time.Minute)), "ended now")
	assert.False(t, states[0].RunNow.IsZero(), "still waiting: no scheduler runs")

	r = run(t, env, "", "schedules", "run", "-queue", q.Name(), "-payload-container", container, "-name", "nonesuch")
	assert.Equal(t, exitCode(azdispatch.ErrScheduleNotFound), r.code, r)
	assert.Contains(t, r.stderr, `schedule "nonesuch"`)
	assert.Contains(t, r.stderr, "not found")
}

// The controls' mistakes are usage errors, found before any request.
func TestSchedulesControlUsage(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"schedules", "-h"}, exitOK, "schedules pause -queue NAME"},
		{[]string{"schedules", "pause", "-h"}, exitOK, "misfire policy"},
		{[]string{"schedules", "pause", "-queue", "q", "-for", "1h"}, exitUsage, "needs -name"},
		{[]string{"schedules", "pause", "-queue", "q", "-name", "n"}, exitUsage, "needs -for"},
		{[]string{"schedules", "pause", "-queue", "q", "-name", "n", "-for", "-1m"}, exitUsage, "above 0"},
		{[]string{"schedules", "run", "-name", "n"}, exitUsage, "-queue"},
		{[]string{"schedules", "resume", "-queue", "q", "-name", "n", "extra"}, exitUsage, "takes no arguments"},
	} {
		r := run(t, env, "", c.args...)
		assert.Equal(t, c.code, r.code, "%v: %s", c.args, r)
		assert.Contains(t, r.stderr, c.says, "%v", c.args)
	}
}
