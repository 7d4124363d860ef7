package azurite

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The generated certificate is a key pair TLS can load, valid for every
// name a client may use for the emulator, and trusted by the pool returned
// with it alone.
func TestSelfSignedCertificate(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots, err := writeSelfSigned(t.TempDir())
	require.NoError(t, err)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	for _, name := range []string{"127.0.0.1", "::1", "localhost"} {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name})
		assert.NoError(t, err, name)
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: "localhost"})
	assert.Error(t, err, "trusted without its pool")
}

// A token carries what Azurite's basic OAuth checks.
func TestTokenClaims(t *testing.T) {
	t.Parallel()
	nbf := time.Unix(1_700_000_000, 0)
	parts := strings.Split(Token(StorageAudience, nbf, nbf.Add(time.Hour)), ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(raw, &claims))
	assert.Equal(t, StorageAudience, claims["aud"])
	assert.True(t, strings.HasPrefix(claims["iss"].(string), "https://sts.windows.net/"))
	assert.EqualValues(t, nbf.Unix(), claims["nbf"])
	assert.EqualValues(t, nbf.Unix(), claims["iat"])
	assert.EqualValues(t, nbf.Add(time.Hour).Unix(), claims["exp"])
}

// An OAuth instance serves HTTPS with a certificate its TLSConfig trusts
// (and nothing else does), and takes a valid bearer token but not an
// expired one or one for another audience.
func TestOAuthOverHTTPS(t *testing.T) {
	SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel()
	inst, err := Start(ctx, &Options{OAuth: true, Log: logWriter{t}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, inst.Stop()) })
	assert.True(t, strings.HasPrefix(inst.QueueEndpoint(), "https://127.0.0.1:"), inst.QueueEndpoint())
	assert.True(t, strings.HasPrefix(inst.BlobEndpoint(), "https://127.0.0.1:"), inst.BlobEndpoint())
	assert.Contains(t, inst.ConnectionString(), "DefaultEndpointsProtocol=https;")

	tr := &http.Transport{Proxy: nil, TLSClientConfig: inst.TLSConfig()}
	defer tr.CloseIdleConnections()
	trusting := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	status := func(c *http.Client, endpoint, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?comp=list", nil)
		require.NoError(t, err)
		req.Header.Set("x-ms-version", "2023-11-03")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("x-ms-error-code"), nil
	}

	untrusting := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	_, _, err = status(untrusting, inst.QueueEndpoint(), "")
	assert.Error(t, err, "a client that does not trust the test certificate connects")

	now := time.Now()
	for _, ep := range []string{inst.QueueEndpoint(), inst.BlobEndpoint()} {
		code, _, err := status(trusting, ep, Token(StorageAudience, now.Add(-time.Minute), now.Add(time.Hour)))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code, "%s with a valid token", ep)
		for what, token := range map[string]string{
			"expired":        Token(StorageAudience, now.Add(-2*time.Hour), now.Add(-time.Hour)),
			"wrong audience": Token("https://management.azure.com", now.Add(-time.Minute), now.Add(time.Hour)),
		} {
			code, errCode, err := status(trusting, ep, token)
			require.NoError(t, err)
			assert.Equal(t, http.StatusForbidden, code, "%s with an %s token", ep, what)
			assert.Equal(t, "AuthenticationFailed", errCode, "%s with an %s token", ep, what)
		}
	}
}
