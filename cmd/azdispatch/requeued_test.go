package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// bodyOf is a requeued message's text without a metadata line, should it
// carry one (Requeue adds the IDs it had to one; see
// azdispatch.MetadataRequeuedFrom).
func bodyOf(t *testing.T, text string) string {
	t.Helper()
	_, body, err := azdispatch.ParseMetadata(text)
	require.NoError(t, err)
	return body
}

// receiveRequeued receives from src until a message requeued with body
// comes, checks that it came back byte for byte (the CLI sends a text
// without metadata, which Requeue leaves as it is), and deletes it.
func receiveRequeued(t *testing.T, src azdispatch.Source, body string) *azdispatch.Delivery {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := src.Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
		require.NoError(t, err)
		for _, d := range ds {
			if d.Text != body {
				continue
			}
			require.NoError(t, src.Delete(ctx, d))
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no message requeued with %q received", body)
	return nil
}
