package azdispatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An account's payload stores have one name: PayloadStore, with "" for the
// default container, the one its queues offload to. Neither makes a request.
func TestPayloadStoreWithNoNameIsTheDefault(t *testing.T) {
	t.Parallel()
	const key = "c2VjcmV0LWtleS10aGF0LW11c3Qtbm90LWxlYWstYW55d2hlcmUtMDEyMzQ1Njc4OQ=="
	a, err := NewAccountFromConnectionString("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="+key+
		";QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1", nil)
	require.NoError(t, err)
	def, err := a.PayloadStore("")
	require.NoError(t, err)
	assert.Equal(t, "azdispatch-payloads", def.Container())
	named, err := a.PayloadStore("mine")
	require.NoError(t, err)
	assert.Equal(t, "mine", named.Container())
	_, err = a.PayloadStore("No")
	var ce *ConfigError
	assert.ErrorAs(t, err, &ce, "a name the service refuses is refused")

	q, err := a.Queue("orders")
	require.NoError(t, err)
	assert.Equal(t, def.Container(), q.PayloadStore().Container(), "a queue's is its account's default")
}

// A queue's poison queue has one name, PoisonQueue, which is what listeners
// find through PoisonQueuer: a *Queue beside it, or a nil interface (never a
// nil *Queue in a non-nil Shard) when there is none.
func TestPoisonQueueIsAQueueOrNil(t *testing.T) {
	t.Parallel()
	const key = "c2VjcmV0LWtleS10aGF0LW11c3Qtbm90LWxlYWstYW55d2hlcmUtMDEyMzQ1Njc4OQ=="
	a, err := NewAccountFromConnectionString("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="+key+
		";QueueEndpoint=http://127.0.0.1:1/devstoreaccount1", nil)
	require.NoError(t, err)
	q, err := a.Queue("orders")
	require.NoError(t, err)
	var pq PoisonQueuer = q
	p, ok := pq.PoisonQueue().(*Queue)
	require.True(t, ok, "a *Queue")
	assert.Equal(t, "orders-poison", p.Name())

	own, err := NewQueueWithSAS("https://other.queue.core.windows.net/jobs?sv=2022-11-02&sp=raup&sig=SIG", nil)
	require.NoError(t, err)
	assert.True(t, own.PoisonQueue() == nil, "a nil interface")

	sq, err := NewShardedQueue("set", []Shard{q, own}, nil)
	require.NoError(t, err)
	assert.True(t, sq.PoisonQueue() == nil, "not every shard has one: a nil interface")
}
