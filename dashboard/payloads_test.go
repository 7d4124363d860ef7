package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// The payloads page counts the package's blobs by kind, with their bytes,
// from a dry-run sweep: a claim-checked message and a batch, live.
func TestThePayloadsPageCountsBlobsAndBytesByKind(t *testing.T) {
	azurite.SkipIfShort(t) // it needs an emulator, as the module's other storage tests do
	t.Parallel()
	ctx := context.Background()
	emulator := azuritetest.Start(t, nil)
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue("payloads")
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))
	pub, err := azdispatch.NewPublisher[string](q, nil)
	require.NoError(t, err)
	_, err = pub.Send(ctx, strings.Repeat("x", azdispatch.MaxMessageSize)) // claim-checked
	require.NoError(t, err)
	_, err = pub.SendBatch(ctx, []string{"a", "b", "c"}, nil)
	require.NoError(t, err)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}})
	status, _, body := get(t, srv, "payloads")
	require.Equal(t, 200, status)
	for _, row := range []string{
		`of them, claim checks</th><td class="num">1<`,
		`of them, batches</th><td class="num">1<`,
		`a sweep would remove</th><td class="num sweep-due">0<`,
	} {
		assert.Contains(t, body, row)
	}
	assert.Regexp(t, `this package's blobs</th><td class="num">2</td><td class="num">[1-9][0-9.]* (B|KiB)<`, body,
		"their bytes as stored (a payload is compressed)")
	assert.NotContains(t, body, "not read")
}
