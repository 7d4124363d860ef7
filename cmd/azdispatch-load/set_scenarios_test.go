package main

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Short runs of the priority and fairness scenarios check them end to end:
// a record per variant with the fields the -json output promises. Their
// thresholds are judged by running the program at full size, not here.
func TestPriorityScenarioRecordsEachVariant(t *testing.T) {
	o := options{priority: priorityConfig{Messages: 300, Backlog: 200, Hold: 5 * time.Millisecond, HighEvery: 5 * time.Millisecond, Highs: 5}}
	recs, lines, err := runPriority(t.Context(), o, io.Discard)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Len(t, lines, 3)
	for i, c := range []struct {
		variant string
		fields  []string
	}{
		{"weighted", []string{"weights", "served", "shares", "ok"}},
		{"strict", []string{"high_p99_ms", "highs", "handler_ms", "ok"}},
		{"strict-no-wake", []string{"high_p99_ms", "highs", "ok"}},
	} {
		got := asJSON(t, recs[i].Own)
		assert.Equal(t, "priority", got["scenario"])
		assert.Equal(t, c.variant, got["variant"])
		for _, f := range c.fields {
			assert.Contains(t, got, f, c.variant)
		}
	}
}

func TestFairnessScenarioRecordsEachVariant(t *testing.T) {
	o := options{fairness: fairnessConfig{Tenants: 3, Flood: 200, QuietBurst: 4, QuietEvery: 20 * time.Millisecond, Window: 100 * time.Millisecond,
		Hold: time.Millisecond, Rounds: 1, IdleQueues: 5, IdleMax: 20 * time.Millisecond, IdleWarmup: 50 * time.Millisecond, IdleWindow: 200 * time.Millisecond}}
	recs, lines, err := runFairness(t.Context(), o, io.Discard)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Len(t, lines, 3)
	for i, variant := range []string{"flood", "flood-uncapped", "idle"} {
		got := asJSON(t, recs[i].Own)
		assert.Equal(t, "fairness", got["scenario"])
		assert.Equal(t, variant, got["variant"])
		assert.Contains(t, got, "ok")
	}
	assert.Contains(t, asJSON(t, recs[0].Own), "quiet_p99_flood_median_ms")
	assert.Contains(t, asJSON(t, recs[2].Own), "ratio")
}

// asJSON is v as -json prints it, read back.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	text, err := json.Marshal(v)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(text, &got))
	return got
}
