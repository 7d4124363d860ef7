package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/dashboard"
)

// Credentials that must never reach a page. Nothing listens at the
// endpoint, so every reading fails and its error is shown: that is where a
// secret would leak.
const (
	secretKey = "c2VjcmV0LWtleS10aGF0LW11c3Qtbm90LWxlYWstYW55d2hlcmUtMDEyMzQ1Njc4OQ=="
	secretSig = "SECRETSIGNATUREabc123%3D"
	endpoint  = "http://127.0.0.1:1/devstoreaccount1"
)

func TestNoPageShowsAKeyASASOrAURL(t *testing.T) {
	t.Parallel()
	opts := &azdispatch.AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1, TryTimeout: 5 * time.Second},
	}}}
	conn := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + secretKey +
		";QueueEndpoint=" + endpoint + ";BlobEndpoint=" + endpoint
	keyed, err := azdispatch.NewAccountFromConnectionString(conn, opts)
	require.NoError(t, err)
	orders, err := keyed.Queue("orders")
	require.NoError(t, err)
	sas, err := azdispatch.NewAccountWithSAS(endpoint+"?sv=2022-11-02&ss=q&srt=sco&sp=rl&se=2030-01-01T00%3A00%3A00Z&sig="+secretSig, opts)
	require.NoError(t, err)
	jobs, err := sas.Queue("jobs")
	require.NoError(t, err)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{orders, jobs}, Write: true})
	for _, page := range []string{"", "poison?reveal=1", "payloads", "schedules", "latency", "cost", "confirm?do=sweep"} {
		status, _, body := get(t, srv, page)
		require.Equal(t, http.StatusOK, status, page)
		for _, secret := range []string{secretKey, secretKey[:20], secretSig, "SECRETSIGNATURE", "sig=", "http://127.0.0.1", "AccountKey"} {
			assert.NotContains(t, body, secret, page)
		}
	}
	_, _, body := get(t, srv, "")
	assert.Contains(t, body, "not read:", "the readings failed, and say so")
	assert.True(t, strings.Contains(body, "devstoreaccount1"), "the account is named")
}
