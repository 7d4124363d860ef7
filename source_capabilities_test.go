package azdispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/memqueue"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// CapabilitiesOf reads what each of this module's sources offers, and a
// wrapper that passes on only the Source and Target methods offers nothing
// more: what it hides, a listener or a publisher over it goes without.
func TestCapabilitiesOfTheModulesSources(t *testing.T) {
	t.Parallel()
	account, err := azdispatch.NewAccountFromConnectionString("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"+
		"AccountKey=c2VjcmV0LWtleS10aGF0LW11c3Qtbm90LWxlYWstYW55d2hlcmUtMDEyMzQ1Njc4OQ==;"+
		"QueueEndpoint=http://127.0.0.1:1/devstoreaccount1;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1", nil)
	require.NoError(t, err)
	q, err := account.Queue("orders")
	require.NoError(t, err)
	mem := memqueue.New("jobs", nil)
	sharded, err := azdispatch.NewShardedQueue("jobs", []azdispatch.Shard{mem, memqueue.New("jobs-1", nil)}, nil)
	require.NoError(t, err)
	type wrapper struct{ azdispatch.Shard }

	for _, c := range []struct {
		name string
		v    any
		want []string
	}{
		{"Queue", q, []string{"Peek", "PoisonQueue", "PayloadStore", "Subscribe", "Create", "Exists", "Host", "Account", "Transactions", "ServiceTime", "Pauser"}},
		{"ShardedQueue", sharded, []string{"Peek", "PoisonQueue", "PayloadStore", "Subscribe", "SendKeyed", "Create", "Degraded", "Shards", "ServiceTime", "Pauser"}},
		{"memqueue", mem, []string{"Peek", "PoisonQueue", "PayloadStore", "Subscribe", "Transactions", "ServiceTime", "Pauser"}},
		{"wrapper", wrapper{q}, nil},
		{"nil", nil, nil},
	} {
		assert.Equal(t, c.want, sourcetest.Offered(azdispatch.CapabilitiesOf(c.v)), c.name)
	}
	caps := azdispatch.CapabilitiesOf(q)
	assert.Equal(t, "127.0.0.1:1", caps.Host(), "a bound method of the queue")
	assert.Same(t, account, caps.Account())
	assert.Equal(t, []azdispatch.Shard{mem, sharded.Shards()[1]}, azdispatch.CapabilitiesOf(sharded).Shards())
}

// A publisher and a listener over a source that offers nothing beyond its
// interfaces work all the same, through Send and Receive alone.
func TestSourceOfNoCapabilitiesWorks(t *testing.T) {
	t.Parallel()
	mem := memqueue.New("plain", nil)
	type wrapper struct{ azdispatch.Shard }
	pub, err := azdispatch.NewPublisher[string](wrapper{mem}, nil)
	require.NoError(t, err)
	_, err = pub.Send(context.Background(), "hello")
	require.NoError(t, err)
	got := make(chan string, 1)
	l, err := azdispatch.NewListener(wrapper{mem}, func(_ context.Context, m *azdispatch.Message[string]) error {
		got <- m.Body
		return nil
	}, &azdispatch.ListenerOptions{PoisonQueue: mem.PoisonQueue()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	select {
	case body := <-got:
		assert.Equal(t, "hello", body)
	case <-time.After(10 * time.Second):
		t.Error("the message was not handled")
	}
	cancel()
	require.NoError(t, <-done)
}
