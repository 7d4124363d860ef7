package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedactRemovesEverySecretShape(t *testing.T) {
	t.Parallel()
	const key = "c2VjcmV0LWtleS1ub2JvZHktc2hvdWxkLXNlZQ=="
	const sig = "AbCdEf+gh/ij=="
	const sigEncoded = "AbCdEf%2Bgh%2Fij%3D%3D"
	cases := []struct{ name, in string }{
		{"SAS in a URL", "GET https://a.queue.core.windows.net/q/messages?sv=2022-11-02&se=2099&sig=" + sigEncoded + "&sp=r failed"},
		{"signature at the end", "url: http://127.0.0.1:1/devstoreaccount1?sig=" + sigEncoded},
		{"upper-case name", "SIG=" + sigEncoded + "&x=1"},
		{"account key", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + key + ";EndpointSuffix=core.windows.net"},
		{"SAS in a connection string", "QueueEndpoint=http://x;SharedAccessSignature=sv=1&sig=" + sig + ";BlobEndpoint=http://y"},
		{"URL-encoded signature in another value", "next=%3Fsv%3D1%26sig%3D" + sigEncoded},
		{"shared key header", "Authorization: SharedKey devstoreaccount1:" + key},
	}
	for _, c := range cases {
		var r redactor
		got := r.redact(c.in)
		for _, secret := range []string{key, sig, sigEncoded, "c2VjcmV0"} {
			assert.NotContains(t, got, secret, c.name)
		}
		assert.Contains(t, got, redacted, c.name)
	}
}

func TestRedactRemovesKnownSecretsAnywhere(t *testing.T) {
	t.Parallel()
	const sig = "Zm9yZ2VkLXNpZ25hdHVyZQ"
	conn := "QueueEndpoint=http://127.0.0.1:1/a;SharedAccessSignature=sv=2022-11-02&sig=" + sig
	var r redactor
	r.add(conn)
	for _, in := range []string{
		"the string was " + conn,
		"a bare signature " + sig + " in prose",
		"a JSON " + strings.ReplaceAll(conn, "&", `\u0026`),
	} {
		got := r.redact(in)
		assert.NotContains(t, got, sig, in)
	}
	assert.Equal(t, "nothing secret here: sig", r.redact("nothing secret here: sig"), "text without secrets is unchanged")
}
