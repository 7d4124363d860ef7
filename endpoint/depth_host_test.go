package endpoint

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// Two accounts of the same name (two emulators, or one name in two clouds)
// are told apart by each shard's "host": the host and port of its queue
// service, never a URL, SAS or key.
func TestDepthHandlerNamesEachShardsHost(t *testing.T) {
	t.Parallel()
	accts := []*azdispatch.Account{account(t, 0, nil), account(t, 1, nil)}
	require.Equal(t, accts[0].Name(), accts[1].Name(), "both emulators serve the same account name")
	require.NotEqual(t, accts[0].Host(), accts[1].Host())
	base := uniqueName(t)
	for i := range 2 {
		newQueue(t, accts[i], i, fmt.Sprintf("%s-%d", base, i))
	}
	shards, err := azdispatch.AccountShards(base, 2, accts...)
	require.NoError(t, err)
	sq, err := azdispatch.NewShardedQueue("tasks", shards, nil)
	require.NoError(t, err)

	h, err := NewDepthHandler(sq, nil)
	require.NoError(t, err)
	code, body := get(t, h)
	require.Equal(t, http.StatusOK, code, string(body))
	var rep depthReport
	require.NoError(t, json.Unmarshal(body, &rep))
	require.Len(t, rep.Shards, 2)
	for i, s := range rep.Shards {
		assert.Equal(t, accts[i].Name(), s.Account)
		assert.Equal(t, accts[i].Host(), s.Host, "shard %d", i)
	}
	assert.NotEqual(t, rep.Shards[0].Host, rep.Shards[1].Host, "the same account name, two hosts")
	for _, secret := range []string{"://", "AccountKey", "sig=", "?"} {
		assert.NotContains(t, string(body), secret)
	}
}
