package main

import (
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// schedules lists a schedule that a Scheduler ran, in a table and in JSON:
// its name, its timetable, the instance that sent its last occurrence; it
// narrows to a queue; a container without schedules says so; and no output
// shows the account key.
func TestSchedulesListsASchedulersState(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	key := regexp.MustCompile(`AccountKey=([^;]+)`).FindStringSubmatch(conn)
	require.Len(t, key, 2, "the emulator's connection string has a key")
	ctx := context.Background()

	acct, err := azdispatch.NewAccountFromConnectionString(conn, nil)
	require.NoError(t, err)
	container := uniqueName(t)
	store, err := acct.PayloadStore(container)
	require.NoError(t, err)
	q := createdQueue(t, conn)
	pub, err := azdispatch.NewPublisher[string](q, &azdispatch.PublisherOptions{Codec: azdispatch.Raw(), Payloads: store})
	require.NoError(t, err)
	instance := "cli-test-" + uniqueName(t)
	s, err := azdispatch.NewScheduler(pub, &azdispatch.SchedulerOptions{Instance: instance, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Add(azdispatch.Schedule[string]{Name: "tick", Every: 2 * time.Second,
		Messages: func(context.Context, azdispatch.Occurrence) ([]string, error) { return []string{"tick"}, nil }}))

	target := []string{"-payload-container", container}
	var doc schedulesDoc
	r := runJSON(t, env, exitOK, &doc, append([]string{"schedules"}, target...)...)
	assert.Empty(t, doc.Schedules, "none before the scheduler runs: %s", r)
	assert.Contains(t, r.stdout, `"schedules": []`)
	r = run(t, env, "", append([]string{"schedules"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "No schedules in container "+container)

	runCtx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- s.Run(runCtx) }()
	require.Eventually(t, func() bool {
		states, err := s.States(ctx)
		return err == nil && len(states) == 1 && states[0].Sent >= 1
	}, time.Minute, 100*time.Millisecond, "the schedule sends its first occurrence")
	stop()
	require.NoError(t, <-ended)

	r = run(t, env, "", append([]string{"schedules"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	for _, want := range []string{"QUEUE", "SCHEDULE", "LAST BY", "CLAIMED BY", q.Name(), "tick", "every 2s", instance, "1 schedule(s)"} {
		assert.Contains(t, r.stdout, want, r)
	}
	assert.Regexp(t, `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`, r.stdout, "times in RFC 3339, UTC")
	t.Logf("table:\n%s", r.stdout)

	rj := runJSON(t, env, exitOK, &doc, append([]string{"schedules"}, target...)...)
	assert.Equal(t, container, doc.Container)
	require.Len(t, doc.Schedules, 1, rj)
	got := doc.Schedules[0]
	assert.Equal(t, "tick", got.Name)
	assert.Equal(t, q.Name(), got.Queue)
	assert.Equal(t, "every 2s", got.Spec)
	assert.Equal(t, instance, got.LastBy)
	assert.GreaterOrEqual(t, got.Sent, int64(1))
	assert.False(t, got.Ended)
	require.NotNil(t, got.Last)
	require.NotNil(t, got.Next)
	require.NotNil(t, got.LastSent)
	assert.True(t, got.Next.After(*got.Last), "next %v, last %v", got.Next, got.Last)
	for _, k := range []string{`"last_by"`, `"claimed_by"`, `"last_sent"`, `"skipped"`} {
		assert.Contains(t, rj.stdout, k)
	}
	t.Logf("json:\n%s", rj.stdout)

	for _, out := range []string{r.stdout + r.stderr, rj.stdout + rj.stderr} {
		assert.NotContains(t, out, key[1])
		assert.NotContains(t, out, conn)
	}

	runJSON(t, env, exitOK, &doc, append([]string{"schedules", "-queue", q.Name()}, target...)...)
	assert.Len(t, doc.Schedules, 1, "narrowed to its own queue")
	assert.Equal(t, q.Name(), doc.Queue)
	other := uniqueName(t)
	runJSON(t, env, exitOK, &doc, append([]string{"schedules", "-queue", other}, target...)...)
	assert.Empty(t, doc.Schedules, "narrowed to another queue")
	r = run(t, env, "", append([]string{"schedules", "-queue", other}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "No schedules of "+other)
}

// The help lists schedules; its mistakes are usage errors.
func TestSchedulesUsage(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}
	r := run(t, env, "", "help")
	assert.Regexp(t, `(?m)^  schedules +list the schedules`, r.stderr)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"schedules", "-h"}, exitOK, "-payload-container"},
		{[]string{"schedules", "extra"}, exitUsage, "takes no arguments"},
		{[]string{"schedules", "-queue", "a", "-base", "b"}, exitUsage, "not both"},
		{[]string{"schedules", "-queue", "Not_A_Name"}, exitUsage, "queue name"},
	} {
		r := run(t, env, "", c.args...)
		assert.Equal(t, c.code, r.code, "%v: %s", c.args, r)
		assert.Contains(t, r.stderr, c.says, "%v", c.args)
	}
}
