package main

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A few seconds of the latency scenario check it end to end: a record per
// variant with the fields the -json output promises. Its figures, and how
// the variants compare, are measured by running the program, not asserted
// here (the machine is shared, and the comparison needs minutes).
func TestLatencyScenarioRecordsBothVariants(t *testing.T) {
	cfg := latencyConfig{
		Rate: 20, Burst: 5, BurstEvery: time.Second, Handler: 50 * time.Millisecond,
		Concurrency: 4, MaxDequeuers: 4, Target: time.Second,
		Warmup: 300 * time.Millisecond, Duration: 1500 * time.Millisecond, Drain: 20 * time.Second,
	}
	o := options{wait: &cfg, latency: time.Millisecond, seed: 1}
	recs, lines, err := runLatency(t.Context(), o, io.Discard)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.NotEmpty(t, lines)
	for i, want := range []string{"depth", "target"} {
		// What -json prints for it.
		text, err := json.Marshal(recs[i].Own)
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(text, &got))
		assert.Equal(t, "latency", got["scenario"], "%s", text)
		assert.Equal(t, want, got["variant"], "%s", text)
		for _, field := range []string{"p50_s", "p99_s", "over_target", "tx_per_msg", "messages", "mean_dequeuers",
			"max_dequeuers_seen", "empty_receives", "rate_per_s", "target_s", "handler_s", "seed"} {
			assert.Contains(t, got, field, "%s", text)
		}
		// The burst falls in the window, so there is something to measure,
		// and every message costs at least its send and its delete.
		assert.Positive(t, got["messages"], "%s", text)
		assert.GreaterOrEqual(t, got["tx_per_msg"], 2.0, "%s", text)
		over := got["over_target"].(float64)
		assert.True(t, over >= 0 && over <= 1, "over_target %v", over)
	}
}
