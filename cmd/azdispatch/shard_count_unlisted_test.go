package main

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With a credential that may not list the account's queues (an account SAS
// without the service resource type), -shards cannot be checked: the
// command says so on stderr and goes on, and still shows a shard that does
// not exist as missing, never as an empty queue at depth 0. The SAS is not
// printed.
func TestShardsUncheckedWhenTheQueuesCannotBeListed(t *testing.T) {
	t.Parallel()
	accounts(t)
	em := harness.emulators[0]
	if em.AccountKey() == "" {
		t.Skip("an external account given without its key: no SAS can be signed for it here")
	}
	cred, err := azqueue.NewSharedKeyCredential(em.AccountName(), em.AccountKey())
	require.NoError(t, err)
	perms := sas.AccountPermissions{Read: true, Write: true, Add: true, Create: true, Update: true, Process: true}
	types := sas.AccountResourceTypes{Container: true, Object: true} // no Service: no List Queues
	qp, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour).UTC(),
		Permissions: perms.String(), ResourceTypes: types.String(),
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	token := qp.Encode()
	conn := "QueueEndpoint=" + em.QueueEndpoint() + ";SharedAccessSignature=" + token
	env := map[string]string{"AZURE_STORAGE_CONNECTION_STRING": conn}

	// Shards 0 and 2 of a set of 3 exist; shard 1 was never created.
	base := uniqueName(t)
	a, _ := twoAccounts(t, em.ConnectionString(), em.ConnectionString())
	ctx := context.Background()
	for _, name := range []string{base + "-0", base + "-2"} {
		q, err := a.Queue(name)
		require.NoError(t, err)
		require.NoError(t, q.Create(ctx))
		_, err = q.Send(ctx, "m", nil)
		require.NoError(t, err)
	}

	var depth depthDoc
	r := runJSON(t, env, exitOK, &depth, "depth", "-base", base, "-shards", "3")
	assert.Contains(t, r.stderr, "cannot check -shards 3 against the shards of "+base+" that exist")
	assert.Contains(t, r.stderr, "a shard that does not exist is shown as missing")
	require.Len(t, depth.Queues, 3)
	assert.Equal(t, 2, depth.Total)
	assert.True(t, depth.Queues[1].Missing, "%+v", depth.Queues[1])
	assert.False(t, depth.Queues[0].Missing)

	r = run(t, env, "", "depth", "-base", base, "-shards", "3")
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, base+`-1\s+devstoreaccount1\s+no queue\s`, r.stdout)
	sig, err := url.QueryUnescape(qp.Signature())
	require.NoError(t, err)
	for _, out := range []string{r.stdout, r.stderr} {
		assert.NotContains(t, out, qp.Signature())
		assert.NotContains(t, out, sig)
		assert.NotContains(t, out, token)
	}
}
