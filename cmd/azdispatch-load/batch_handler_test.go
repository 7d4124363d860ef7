package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A small batch-handler run checks the scenario end to end, and that its
// judgement holds on this machine; the figures are measured by running
// the program.
func TestBatchHandlerScenarioHoldsItsThresholds(t *testing.T) {
	azurite.SkipUnlessLong(t)
	azurite.SkipIfShort(t)
	// The margin for a loaded machine under -race; the scenario holds 250 ms.
	o := options{batchHandler: batchHandlerConfig{Messages: 640, Trickle: 5 * time.Second, Margin: 3 * time.Second}}
	recs, lines, err := runBatchHandler(context.Background(), o, io.Discard)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for i, r := range recs {
		rec := r.Own.(batchHandlerRecord)
		assert.True(t, rec.OK, "%s", lines[i])
		t.Log(lines[i])
	}
}
