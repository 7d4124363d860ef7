package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// bodyOf is a requeued message's text without the metadata line Requeue
// adds (the IDs it had; see azdispatch.MetadataRequeuedFrom).
func bodyOf(t *testing.T, text string) string {
	t.Helper()
	_, body, err := azdispatch.ParseMetadata(text)
	require.NoError(t, err)
	return body
}

// receiveRequeued receives from src until a message requeued with body
// comes, checks that its metadata names the ID it had, and deletes it.
func receiveRequeued(t *testing.T, src azdispatch.Source, body string) *azdispatch.Delivery {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ds, err := src.Receive(ctx, azdispatch.MaxBatch, 30*time.Second)
		require.NoError(t, err)
		for _, d := range ds {
			meta, rest, err := azdispatch.ParseMetadata(d.Text)
			if err != nil || rest != body {
				continue
			}
			assert.NotEmpty(t, meta[azdispatch.MetadataRequeuedFrom], "the ID it had")
			require.NoError(t, src.Delete(ctx, d))
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no message requeued with %q received", body)
	return nil
}
