package connstr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each kind of bad string gets its own reason, and none quotes a value.
func TestDiagnoseSaysWhatIsWrongWithoutQuotingIt(t *testing.T) {
	t.Parallel()
	const key = "c2VjcmV0LWtleS1ieXRlcw=="
	for _, c := range []struct{ cs, want string }{
		{"", "empty"},
		{"   ", "empty"},
		{"garbage", "not Name=value settings"},
		{"AccountName=acct;garbage;AccountKey=" + key, "one of its parts (between semicolons) is not Name=value"},
		{"AccountName=acct;garbage;junk;AccountKey=" + key, "2 of its parts (between semicolons) are not Name=value"},
		{`"AccountName=acct;AccountKey=` + key + `"`, "wrapped in quotes"},
		{"'AccountName=acct;AccountKey=" + key + "'", "wrapped in quotes"},
		{"AccountName=acct;AccountKey=" + key + "\n", ""},
		{"AccountName=acct", "neither AccountName with AccountKey, nor SharedAccessSignature"},
		{"AccountKey=" + key, "AccountKey but no AccountName"},
		{"AccountName=acct;AccountKey=not*base64!", "AccountKey is not base64"},
		{"AccountName=acct;AccountKey=", "AccountKey is empty"},
		{"AccountName=;AccountKey=" + key, "AccountName is empty"},
		{"AccountName=acct;AccountKey=" + key + ";SharedAccessSignature=sv=1&sig=s3cr3t", "both AccountKey and SharedAccessSignature"},
		{"SharedAccessSignature=", "SharedAccessSignature is empty"},
		{"SharedAccessSignature=sv=1&sig=s3cr3t", "names no account"},
		{"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + key + ";EndpointSuffix=core.windows.net", ""},
		{"QueueEndpoint=https://acct.queue.core.windows.net;SharedAccessSignature=sv=1&sig=s3cr3t", ""},
	} {
		got := Diagnose(c.cs)
		if c.want == "" {
			assert.Empty(t, got, "%q", c.cs)
			continue
		}
		assert.Contains(t, got, c.want, "%q", c.cs)
		for _, secret := range []string{key, "s3cr3t", "not*base64!", "acct"} {
			assert.NotContains(t, got, secret, "%q", c.cs)
		}
	}
}
