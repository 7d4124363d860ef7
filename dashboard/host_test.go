package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// Two emulators serve the same account name: one sharded queue over both
// shows, on the overview, each shard's and each account's host, two
// distinct ones, and never a URL or a key.
func TestTheOverviewTellsApartTwoAccountsOfOneName(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	var accts []*azdispatch.Account
	secrets := []string{"http://", "AccountKey", "sig="}
	for range 2 {
		emulator := azuritetest.Start(t, nil)
		conn := emulator.ConnectionString(0)
		a, err := azdispatch.NewAccountFromConnectionString(conn, nil)
		require.NoError(t, err)
		accts = append(accts, a)
		for _, part := range strings.Split(conn, ";") {
			if key, ok := strings.CutPrefix(part, "AccountKey="); ok && key != "" {
				secrets = append(secrets, key)
			}
		}
	}
	require.Equal(t, accts[0].Name(), accts[1].Name(), "the same account name")
	require.NotEqual(t, accts[0].Host(), accts[1].Host())
	shards, err := azdispatch.AccountShards("hosts", 2, accts...)
	require.NoError(t, err)
	for _, sh := range shards {
		require.NoError(t, sh.(*azdispatch.Queue).Create(ctx))
	}
	set, err := azdispatch.NewShardedQueue("hosts", shards, nil)
	require.NoError(t, err)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{set}})
	status, _, body := get(t, srv, "")
	require.Equal(t, http.StatusOK, status)
	for i, a := range accts {
		shard := fmt.Sprintf("hosts-%d", i)
		assert.Regexp(t, fmt.Sprintf(`<tr data-name="%s" data-host="%s">\s*<th scope="row">%s<span class="sub where">account %s at %s</span></th>`,
			shard, regexp.QuoteMeta(a.Host()), shard, a.Name(), regexp.QuoteMeta(a.Host())), body, "shard %d names its account and host", i)
		assert.Regexp(t, fmt.Sprintf(`<tr data-name="%s" data-host="%s">\s*<th scope="row">%s<span class="sub where">at %s</span></th>\s*<td>account \(1 queues\)</td>`,
			a.Name(), regexp.QuoteMeta(a.Host()), a.Name(), regexp.QuoteMeta(a.Host())), body, "account %d's row has its host", i)
	}
	assert.Contains(t, body, fmt.Sprintf("on %s, %s", accts[0].Host(), accts[1].Host()), "the set's row lists both hosts")
	for _, secret := range secrets {
		assert.NotContains(t, body, secret)
	}

	// The cost page names each account with its host too.
	_, _, cost := get(t, srv, "cost")
	for _, a := range accts {
		assert.Contains(t, cost, a.Name()+" at "+a.Host())
	}
	for _, secret := range secrets {
		assert.NotContains(t, cost, secret)
	}
}
