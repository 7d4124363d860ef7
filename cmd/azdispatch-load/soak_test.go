package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runSoak runs a soak scenario and returns its one record, of type R. Its
// progress and table are logged whatever the outcome: they hold the seed,
// so that a failure can be replayed with -seed.
func runSoak[R any](t *testing.T, run scenario, o options) R {
	t.Helper()
	var progress bytes.Buffer
	recs, lines, err := run(t.Context(), o, &progress)
	t.Log("\n" + progress.String() + strings.Join(lines, "\n"))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	rec, ok := recs[0].Own.(R)
	require.True(t, ok, "the scenario's own record, a %T", rec)
	return rec
}
