package azdispatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Host tells apart two accounts of the same name, and is never more than
// a host: no scheme, path, SAS or key.
func TestHostIsTheServiceHostAndNothingMore(t *testing.T) {
	t.Parallel()
	const key = "c2VjcmV0LWtleS10aGF0LW11c3Qtbm90LWxlYWstYW55d2hlcmUtMDEyMzQ1Njc4OQ=="
	emu := func(port string) *Account {
		a, err := NewAccountFromConnectionString("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="+key+
			";QueueEndpoint=http://127.0.0.1:"+port+"/devstoreaccount1", nil)
		require.NoError(t, err)
		return a
	}
	one, two := emu("10001"), emu("10011")
	assert.Equal(t, one.Name(), two.Name(), "the same name")
	assert.Equal(t, "127.0.0.1:10001", one.Host())
	assert.Equal(t, "127.0.0.1:10011", two.Host())
	q, err := two.Queue("orders")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:10011", q.Host(), "a queue's host is its account's")

	sas, err := NewAccountWithSAS("https://acct.queue.core.windows.net/?sv=2022-11-02&ss=q&srt=sco&sp=rl&sig=SECRETSIG", nil)
	require.NoError(t, err)
	assert.Equal(t, "acct.queue.core.windows.net", sas.Host())
	own, err := NewQueueWithSAS("https://other.queue.core.windows.net/jobs?sv=2022-11-02&sp=raup&sig=SECRETSIG", nil)
	require.NoError(t, err)
	assert.Equal(t, "other.queue.core.windows.net", own.Host(), "a queue opened by its own SAS URL: that URL's host")
	for _, h := range []string{one.Host(), sas.Host(), own.Host()} {
		assert.NotContains(t, h, "/")
		assert.NotContains(t, h, "?")
		assert.NotContains(t, h, "SECRETSIG")
	}
}
