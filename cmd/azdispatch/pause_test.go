package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pause, pause -status and resume against a queue, as a listener reads
// them; the flags are checked before any request, and a missing queue
// fails as in every command.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	conn, _ := accounts(t)
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}
	q := createdQueue(t, conn)
	target := []string{"-queue", q.Name()}

	var doc pauseDoc
	runJSON(t, env, exitOK, &doc, append([]string{"pause", "-for", "30m", "-by", "ops: the payments API is down"}, target...)...)
	require.True(t, doc.Paused)
	assert.WithinRange(t, *doc.Until, doc.Since.Add(30*time.Minute), doc.Since.Add(30*time.Minute+3*time.Second), "at least the pause asked, to the second")
	st, err := q.PauseState(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ops: the payments API is down", st.By)
	assert.True(t, st.Until.Equal(*doc.Until))

	r := run(t, env, "", append([]string{"pause", "-status"}, target...)...)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "ops: the payments API is down")

	runJSON(t, env, exitOK, &doc, append([]string{"resume"}, target...)...)
	assert.False(t, doc.Paused)
	st, err = q.PauseState(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st)

	for _, args := range [][]string{{"pause"}, {"pause", "-for", "-1m"}, {"pause", "-for", "1m", "-status"}} {
		r := run(t, env, "", append(args, target...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r)
	}
	r = run(t, env, "", "pause", "-for", "1m", "-queue", uniqueName(t))
	assert.Equal(t, exitFailed, r.code, r)
	assert.Contains(t, r.stderr, "no such queue")
}
