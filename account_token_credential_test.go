package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/internal/payload"
)

// tokenCredential is an azcore.TokenCredential that mints the tokens
// Azurite's basic OAuth accepts (see azurite.Token), as a Microsoft Entra ID
// credential would for the scope the SDK asks for.
type tokenCredential struct {
	audience string        // "" means the one the requested scope names
	lifetime time.Duration // negative: every token has already expired
	calls    atomic.Int64
}

func (c *tokenCredential) GetToken(_ context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.calls.Add(1)
	aud := c.audience
	if aud == "" {
		if len(opts.Scopes) != 1 {
			return azcore.AccessToken{}, errors.New("want one scope")
		}
		aud = strings.TrimSuffix(opts.Scopes[0], "/.default")
	}
	now := time.Now()
	nbf, exp := now.Add(-time.Minute), now.Add(c.lifetime)
	if c.lifetime < 0 {
		nbf = exp.Add(-time.Hour)
	}
	return azcore.AccessToken{Token: azurite.Token(aud, nbf, exp), ExpiresOn: exp}, nil
}

// tokenAccount opens the OAuth emulator's account with cred, over a client
// that trusts the emulator's certificate.
func tokenAccount(t *testing.T, inst *azurite.Instance, cred azcore.TokenCredential) *Account {
	t.Helper()
	tr := &http.Transport{Proxy: nil, TLSClientConfig: inst.TLSConfig(), MaxIdleConnsPerHost: 32}
	t.Cleanup(tr.CloseIdleConnections)
	a, err := NewAccount(inst.QueueEndpoint(), cred, &AccountOptions{
		BlobServiceURL: inst.BlobEndpoint(),
		Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: &http.Client{Transport: tr},
			Retry:     policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond},
		}},
	})
	require.NoError(t, err)
	return a
}

// An account opened with a token credential (NewAccount) works end to end,
// queue and blob service alike, against an Azurite that takes bearer tokens
// over HTTPS; a token that has expired, or is for another audience, is
// refused with a StorageError.
func TestTokenCredential(t *testing.T) {
	t.Parallel()
	azurite.SkipIfShort(t)
	start, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
	defer cancel() // bounds the start only; the subtests run after this returns
	inst, err := azurite.Start(start, &azurite.Options{OAuth: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, azurite.HowTo)
	}
	// Stopped after every subtest, parallel ones included, has finished.
	t.Cleanup(func() { assert.NoError(t, inst.Stop()) })

	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		cred := &tokenCredential{lifetime: time.Hour}
		q, err := tokenAccount(t, inst, cred).Queue(uniqueName(t))
		require.NoError(t, err)
		p, err := NewPublisher[string](q, nil)
		require.NoError(t, err)
		big := strings.Repeat("large ", 12<<10) // over 64 KiB: offloaded to a blob
		for _, body := range []string{"hello", big} {
			_, err := p.Send(ctx, body)
			require.NoError(t, err)
		}
		_, err = p.SendBatch(ctx, []string{"item 0", "item 1"}, nil)
		require.NoError(t, err)

		var mu sync.Mutex
		got := map[string]int{}
		l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
			mu.Lock()
			defer mu.Unlock()
			got[m.Body]++
			return nil
		}, &ListenerOptions{Scaling: ScalingOptions{Idle: ExponentialIdle(0, 200*time.Millisecond)}})
		require.NoError(t, err)
		stop := started(t, l)
		waitFor(t, "every message handled", func() bool {
			s := l.State()
			return s.Succeeded == 3 && s.ItemsSucceeded == 2
		})
		require.NoError(t, stop())
		mu.Lock()
		assert.Equal(t, map[string]int{"hello": 1, big: 1, "item 0": 1, "item 1": 1}, got)
		mu.Unlock()
		assert.Equal(t, 0, depth(t, q))
		assert.Positive(t, cred.calls.Load(), "the credential was asked for tokens")
		assert.Positive(t, l.State().Transactions.BlobRead, "the payloads were read over the same credential")
	})

	for _, c := range []struct {
		name string
		cred *tokenCredential
	}{
		{"expired token", &tokenCredential{lifetime: -time.Hour}},
		{"wrong audience", &tokenCredential{audience: "https://management.azure.com", lifetime: time.Hour}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			a := tokenAccount(t, inst, c.cred)
			q, err := a.Queue(uniqueName(t))
			require.NoError(t, err)
			_, err = q.Send(ctx, "refused", nil)
			assertUnauthenticated(t, err)
			store, err := a.PayloadStore("")
			require.NoError(t, err)
			_, err = store.put(ctx, payload.Meta{Kind: payload.KindSingle, Queue: q.Name(), Created: time.Now(), Items: 1}, []byte("refused"))
			assertUnauthenticated(t, err)
		})
	}
}

// assertUnauthenticated checks that err is a StorageError for a refused
// bearer token: Azurite answers 403 AuthenticationFailed, the service (at
// recent API versions) 401 InvalidAuthenticationInfo.
func assertUnauthenticated(t *testing.T, err error) {
	t.Helper()
	var se *StorageError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, se.StatusCode, "%v", err)
	assert.Contains(t, []string{"AuthenticationFailed", "InvalidAuthenticationInfo"}, se.Code, "%v", err)
}
