package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails a run whose tests pass but leave a goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example's -json record: every handler call, batch items and the
// claim-checked message included, has a process span linked to its send,
// and the transactions metric has the requests by kind.
func TestObserveLinksEveryProcessSpanToItsProducer(t *testing.T) {
	if testing.Short() {
		if os.Getenv("AZDISPATCH_REQUIRE_AZURITE") != "" {
			t.Fatal("AZDISPATCH_REQUIRE_AZURITE is set: run without -short, with Azurite")
		}
		t.Skip("runs against Azurite (Node.js): run without -short")
	}
	// The test suite's account, if it names one; never the one a
	// developer keeps for real work in AZURE_STORAGE_CONNECTION_STRING.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", os.Getenv("AZDISPATCH_CONNECTION_STRING"))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, 3, true))
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), "output: %s", out.String())
	t.Logf("%s", out.String())
	assert.Equal(t, 3+1+batchItems, s.HandlerCalls)
	assert.Equal(t, 3+1+1, s.QueueMessages, "a batch is one queue message")
	assert.Equal(t, s.HandlerCalls, s.ProcessSpans)
	assert.Equal(t, s.HandlerCalls, s.LinkedToProducer)
	assert.Equal(t, 2, s.ClaimChecked, "the large message and the batch went to blobs")
	for _, name := range []string{"messaging.client.sent.messages", "messaging.client.consumed.messages",
		"messaging.process.duration", "messaging.client.operation.duration", "azdispatch.storage.transactions",
		"azdispatch.listener.dequeuers", "azdispatch.listener.in_flight"} {
		assert.Contains(t, s.Metrics, name)
	}
	for _, kind := range []string{"send", "receive", "delete", "blob_write", "blob_read", "blob_delete"} {
		assert.Positive(t, s.Transactions[kind], "transactions of kind %s", kind)
	}
	assert.Positive(t, s.Transactions["other"], "the oldest age's peek")
	assertMessageTimesAndAge(t, s)
}

// assertMessageTimesAndAge checks the -json record's message times and
// oldest age: time in queue counts every handler call on a first delivery
// (here all of them), end-to-end every call, and the oldest age was read.
func assertMessageTimesAndAge(t *testing.T, s summary) {
	t.Helper()
	for _, name := range []string{"azdispatch.message.time_in_queue", "azdispatch.message.end_to_end",
		"azdispatch.queue.oldest_age", "azdispatch.listener.retries", "azdispatch.listener.wanted_dequeuers"} {
		assert.Contains(t, s.Metrics, name)
	}
	assert.Equal(t, s.HandlerCalls, s.FirstDeliveryCalls, "no handler fails here")
	for name, h := range map[string]*histogram{"time_in_queue": s.TimeInQueue, "end_to_end": s.EndToEnd} {
		require.NotNil(t, h, name)
		assert.GreaterOrEqual(t, h.Sum, 0.0, name)
		assert.Len(t, h.Counts, len(h.Bounds)+1, name)
		var n uint64
		for _, c := range h.Counts {
			n += c
		}
		assert.Equal(t, h.Count, n, "%s: the buckets hold every value", name)
	}
	assert.EqualValues(t, s.FirstDeliveryCalls, s.TimeInQueue.Count)
	assert.EqualValues(t, s.HandlerCalls, s.EndToEnd.Count)
	require.NotNil(t, s.OldestAge, "read before the listener ran")
	assert.GreaterOrEqual(t, *s.OldestAge, 0.0)
}

// The trees print without error.
func TestObservePrintsTrees(t *testing.T) {
	if testing.Short() {
		if os.Getenv("AZDISPATCH_REQUIRE_AZURITE") != "" {
			t.Fatal("AZDISPATCH_REQUIRE_AZURITE is set: run without -short, with Azurite")
		}
		t.Skip("runs against Azurite (Node.js): run without -short")
	}
	// The test suite's account, if it names one; never the one a
	// developer keeps for real work in AZURE_STORAGE_CONNECTION_STRING.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", os.Getenv("AZDISPATCH_CONNECTION_STRING"))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, 1, false))
	assert.Contains(t, out.String(), "└─ ")
	assert.Contains(t, out.String(), "azdispatch.storage.transactions")
	assert.Contains(t, out.String(), "azdispatch.message.time_in_queue")
	assert.Contains(t, out.String(), "azdispatch.queue.oldest_age")
}
