package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	queuesas "github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/dashboard"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A queue's pause rides on the request that reads its depth: a reading of
// the overview over a paused queue costs what it cost before pauses
// existed, three requests (its depth and pause, its poison queue's depth,
// a peek), and shows who paused it and until when, by the service's
// clock. A pause and a resume from the dashboard reach the queue.
func TestAQueuesPauseRidesOnItsDepthRead(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	emulator := azuritetest.Start(t, nil)
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue("orders")
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))
	st, err := q.Pause(ctx, time.Hour, &azdispatch.PauseOptions{By: "ops: the mail relay is down"})
	require.NoError(t, err)

	h, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{q}, CacheFor: time.Hour, Write: true})
	_, _, body := get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "orders"), "paused by ops: the mail relay is down until "+st.Until.UTC().Format("2006-01-02 15:04:05Z"))
	tx := h.Transactions()
	assert.Equal(t, int64(3), tx.Total(), "no request of its own for the pause: %+v", tx)
	assert.Equal(t, int64(2), tx.Depth, "the queue's and its poison queue's Get Queue Properties")

	status, _, _ := post(t, srv, url.Values{"do": {"resume"}, "confirm": {"yes"}, "queue": {"orders"}})
	require.Equal(t, http.StatusSeeOther, status)
	now, err := q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, azdispatch.PauseState{}, now)

	status, _, _ = post(t, srv, pauseForm("orders", "15m", "ana"))
	require.Equal(t, http.StatusSeeOther, status)
	now, err = q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, "ana", now.By)
	assert.WithinRange(t, now.Until, now.Since.Add(15*time.Minute), now.Since.Add(15*time.Minute+3*time.Second), "at least the pause asked, to the second")
	assert.True(t, now.Active(q.ServiceTime()))
	_, _, body = get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "orders"), "paused by ana until "+now.Until.UTC().Format("2006-01-02 15:04:05Z"))
}

// A dashboard whose SAS may read but not write: the overview reads the
// pause, and a pause says that the service refused its write, and why,
// with no key, signature or address on the page.
func TestAPauseWithAReadOnlySASSaysWhy(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	ctx := context.Background()
	emulator := azuritetest.Start(t, nil)
	conn := connectionFields(emulator.ConnectionString(0))
	admin, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := admin.Queue("orders")
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))

	cred, err := azqueue.NewSharedKeyCredential(conn["AccountName"], conn["AccountKey"])
	require.NoError(t, err)
	sas, err := queuesas.AccountSignatureValues{Protocol: queuesas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour),
		Permissions:   (&queuesas.AccountPermissions{Read: true, Process: true}).String(),
		ResourceTypes: (&queuesas.AccountResourceTypes{Service: true, Container: true, Object: true}).String(),
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	reader, err := azdispatch.NewAccountWithSAS(conn["QueueEndpoint"]+"?"+sas.Encode(), nil)
	require.NoError(t, err)
	readOnly, err := reader.Queue("orders")
	require.NoError(t, err)

	_, srv := server(t, &dashboard.Options{Sources: []azdispatch.Source{readOnly}, Write: true})
	_, _, body := get(t, srv, "")
	assert.Contains(t, pauseCellOf(t, body, "orders"), "not paused", "read with the depth")
	status, _, page := post(t, srv, pauseForm("orders", "1h", "ops"))
	assert.Equal(t, http.StatusBadGateway, status)
	page = html.UnescapeString(page)
	assert.Contains(t, page, `The pause failed at writing the queue's metadata (Set Queue Metadata): `)
	assert.Contains(t, page, `set queue metadata on queue "orders": 403 AuthorizationPermissionMismatch`)
	assert.Contains(t, page, `(the credential needs the Write permission on the queue)`, "the library names what the write lacks")
	for _, secret := range []string{"sig=", conn["AccountKey"], "127.0.0.1", "http://"} {
		assert.NotContains(t, page, secret)
	}
	t.Logf("the page says: %s", messageOf(page))
	now, err := q.PauseState(ctx)
	require.NoError(t, err)
	assert.Equal(t, azdispatch.PauseState{}, now, "nothing paused")
}

// connectionFields splits a connection string into its fields.
func connectionFields(conn string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(conn, ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			out[k] = v
		}
	}
	return out
}

// messageOf is the message of an error page.
func messageOf(page string) string {
	_, rest, _ := strings.Cut(page, `<p class="message">`)
	msg, _, _ := strings.Cut(rest, "</p>")
	return msg
}
