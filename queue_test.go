package azdispatch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueueCreatesItselfOnFirstSendAndCountsEveryRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, err := testAccount(t, nil).Queue(uniqueName(t))
	require.NoError(t, err)

	depth, err := q.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, depth, "a missing queue is empty")

	id, err := q.Send(ctx, "hello", nil)
	require.NoError(t, err)
	assert.NotEmpty(t, id)
	// The first send found no queue (1), created it (1) and sent again (1).
	assert.Equal(t, Transactions{Send: 2, Create: 1, Depth: 1}, q.Transactions())

	batch, err := q.Receive(ctx, 32, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	d := batch[0]
	assert.Equal(t, id, d.ID)
	assert.Equal(t, "hello", d.Text)
	assert.EqualValues(t, 1, d.DequeueCount)
	assert.Equal(t, q.Name(), d.Queue)
	assert.WithinDuration(t, time.Now().Add(30*time.Second), d.NextVisibleAt, 5*time.Second)

	depth, err = q.Depth(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, depth, "the depth counts invisible messages")

	require.NoError(t, q.Delete(ctx, d))
	empty, err := q.Receive(ctx, 32, time.Second)
	require.NoError(t, err)
	assert.Empty(t, empty)

	tx := q.Transactions()
	assert.Equal(t, Transactions{Receive: 2, EmptyReceive: 1, Delete: 1, Send: 2, Depth: 2, Create: 1}, tx)
	assert.EqualValues(t, 8, tx.Total())
	assert.Equal(t, tx, q.account.Transactions(), "the account saw the same requests")
}

func TestQueueSendOptionsDelayAndTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	require.NoError(t, q.Create(ctx))
	require.NoError(t, q.Create(ctx), "Create is idempotent")

	_, err := q.Send(ctx, "later", &SendOptions{Delay: 1500 * time.Millisecond, TTL: time.Hour})
	require.NoError(t, err)
	batch, err := q.Receive(ctx, 1, time.Second)
	require.NoError(t, err)
	assert.Empty(t, batch, "hidden by the initial delay")

	require.Eventually(t, func() bool {
		batch, err = q.Receive(ctx, 1, time.Second)
		return err == nil && len(batch) == 1
	}, 10*time.Second, 200*time.Millisecond)
	assert.WithinDuration(t, batch[0].InsertedAt.Add(time.Hour), batch[0].ExpiresAt, 5*time.Second)

	_, err = q.Send(ctx, "forever", &SendOptions{TTL: -1})
	require.NoError(t, err)
	_, err = q.Send(ctx, "x", &SendOptions{Delay: 8 * 24 * time.Hour})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestQueueSetVisibilityKeepsTextAndTracksThePopReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendTexts(t, q, 1, func(int) string { return `{"keep":"me"} <&>` })

	batch, err := q.Receive(ctx, 1, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	d := batch[0]
	first := d.Receipt.(*popReceipt).value

	require.NoError(t, q.SetVisibility(ctx, d, time.Minute), "renew")
	assert.NotEqual(t, first, d.Receipt.(*popReceipt).value, "an update issues a new pop receipt")
	assert.WithinDuration(t, time.Now().Add(time.Minute), d.NextVisibleAt, 5*time.Second)

	require.NoError(t, q.SetVisibility(ctx, d, 0), "release")
	again, err := q.Receive(ctx, 1, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, again, 1, "a released message is visible at once")
	assert.Equal(t, `{"keep":"me"} <&>`, again[0].Text, "the update kept the text")
	assert.EqualValues(t, 2, again[0].DequeueCount)
	require.NoError(t, q.Delete(ctx, again[0]))
}

func TestQueueStalePopReceiptMeansOwnershipLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)
	sendTexts(t, q, 1, func(int) string { return "contested" })

	batch, err := q.Receive(ctx, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	stale := batch[0]

	var fresh *Delivery
	require.Eventually(t, func() bool { // it reappears after its visibility timeout
		again, err := q.Receive(ctx, 1, 30*time.Second)
		if err != nil || len(again) == 0 {
			return false
		}
		fresh = again[0]
		return true
	}, 10*time.Second, 200*time.Millisecond)
	assert.EqualValues(t, 2, fresh.DequeueCount)

	err = q.SetVisibility(ctx, stale, 0)
	assert.ErrorIs(t, err, ErrOwnershipLost, "update with a stale receipt")
	err = q.Delete(ctx, stale)
	assert.ErrorIs(t, err, ErrOwnershipLost, "delete with a stale receipt")
	var se *StorageError
	require.ErrorAs(t, err, &se)
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re, "the SDK's error stays reachable")
	assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, re.StatusCode)

	require.NoError(t, q.Delete(ctx, fresh), "the new owner deletes it")
	assert.ErrorIs(t, q.Delete(ctx, fresh), ErrOwnershipLost, "a second delete finds nothing")
}

func TestQueueRefusesWhatTheServiceWouldRefuseOrCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := testQueue(t)

	_, err := q.Send(ctx, strings.Repeat("a", serviceMessageLimit+1), nil)
	var tooLarge *MessageTooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.Equal(t, serviceMessageLimit+1, tooLarge.Size)
	assert.ErrorIs(t, err, ErrMessageTooLarge)

	for _, bad := range []string{"nul\x00", "bell\a", "bad utf8 \xff", "\uFFFE"} {
		_, err = q.Send(ctx, bad, nil)
		assert.ErrorIs(t, err, ErrInvalidText, "%q", bad)
	}
	assert.Zero(t, q.Transactions().Total(), "refused without a request")

	// At the limit the emulator takes it: ASCII, and XML specials whose
	// escaping on the wire does not count.
	for _, text := range []string{strings.Repeat("a", serviceMessageLimit), strings.Repeat("<&>\"'", serviceMessageLimit/5)} {
		_, err = q.Send(ctx, text, nil)
		require.NoError(t, err)
		batch, err := q.Receive(ctx, 1, 30*time.Second)
		require.NoError(t, err)
		require.Len(t, batch, 1)
		assert.Equal(t, text, batch[0].Text)
		require.NoError(t, q.Delete(ctx, batch[0]))
	}

	_, err = q.Receive(ctx, 33, time.Second)
	assert.Error(t, err)
	_, err = q.Receive(ctx, 1, 0)
	assert.Error(t, err)
}

func TestQueueRejectsDeliveriesFromElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testQueue(t), testQueue(t)
	sendTexts(t, a, 1, func(int) string { return "from a" })
	batch, err := a.Receive(ctx, 1, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	assert.Error(t, b.Delete(ctx, batch[0]))
	assert.Error(t, b.SetVisibility(ctx, batch[0], 0))
	require.NoError(t, a.Delete(ctx, batch[0]))
}

func TestQueueCountsEveryRetryOfARequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var failures atomic32
	f := &faultTransport{fail: func(r *http.Request) bool {
		return r.Method == http.MethodGet && failures.dec() // the first two receives
	}}
	failures.set(2)
	acct := faultyAccount(t, f, 3)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	require.NoError(t, q.Create(ctx))

	batch, err := q.Receive(ctx, 32, time.Second)
	require.NoError(t, err)
	assert.Empty(t, batch)
	assert.EqualValues(t, 3, q.Transactions().Receive, "two 503s and the attempt that worked")
	assert.EqualValues(t, 1, q.Transactions().EmptyReceive, "one call found nothing")

	failures.set(100)
	counted, c := CountTransactions(ctx)
	_, err = q.Receive(counted, 32, time.Second)
	var se *StorageError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusServiceUnavailable, se.StatusCode)
	assert.Equal(t, "ServerBusy", se.Code)
	assert.EqualValues(t, 4, c().Receive, "MaxRetries 3: four billable attempts")
	assert.Contains(t, err.Error(), "503 ServerBusy")
}

func TestErrorsNeverCarryTheSASSignature(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const secret = "sig=TOPSECRETSIGNATURE"
	noRetry := &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1},
	}}}

	// Nothing listens on port 1: a transport error, whose URL has the query.
	acct, err := NewAccountWithSAS("http://127.0.0.1:1/devstoreaccount1?sv=2020-08-04&ss=q&srt=sco&"+secret, noRetry)
	require.NoError(t, err)
	q, err := acct.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = q.Receive(ctx, 1, time.Second)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "TOPSECRET")
	var ue *url.Error
	require.ErrorAs(t, err, &ue)
	assert.NotContains(t, ue.URL, "TOPSECRET")
	assert.NotContains(t, ue.Error(), "TOPSECRET")

	// The emulator refuses a forged signature: a response error.
	endpoint := strings.TrimSuffix(testAccount(t, nil).service.URL(), "/")
	q, err = NewQueueWithSAS(endpoint+"/"+uniqueName(t)+"?sv=2020-08-04&ss=q&srt=sco&sp=rwdlacup&se=2099-01-01T00:00:00Z&"+secret, noRetry)
	require.NoError(t, err)
	_, err = q.Send(ctx, "x", nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "TOPSECRET")
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, http.StatusForbidden, re.StatusCode)
	assert.Nil(t, q.PoisonQueue(), "a queue-scoped SAS reaches no other queue")

	_, err = NewAccountFromConnectionString("AccountName=x;AccountKey=TOPSECRET", nil)
	if err != nil {
		assert.NotContains(t, err.Error(), "TOPSECRET")
	}
	_, err = NewAccountFromConnectionString("nonsense TOPSECRET", nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "TOPSECRET")
}

func TestAccountCredentialsAllReachTheEmulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testAccount(t, nil)
	endpoint := base.service.URL()

	shared, err := NewAccountWithSharedKey(endpoint, "devstoreaccount1", emulatorKey, nil)
	require.NoError(t, err)
	q, err := shared.Queue(uniqueName(t))
	require.NoError(t, err)
	_, err = q.Send(ctx, "shared key", nil)
	require.NoError(t, err)
	assert.Equal(t, "devstoreaccount1", shared.Name())

	_, err = NewAccountWithSharedKey(endpoint, "devstoreaccount1", "not base64!", nil)
	assert.Error(t, err)
	_, err = NewAccount(endpoint, nil, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)

	// An account SAS signed with the key, as a user would make one.
	cred, err := azqueue.NewSharedKeyCredential("devstoreaccount1", emulatorKey)
	require.NoError(t, err)
	res, perms := sasResources(), sasPermissions()
	params, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, ExpiryTime: time.Now().Add(time.Hour),
		Permissions: perms.String(), ResourceTypes: res.String(),
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	sasURL := endpoint + "?" + params.Encode()
	viaSAS, err := NewAccountWithSAS(sasURL, nil)
	require.NoError(t, err)
	q2, err := viaSAS.Queue(q.Name())
	require.NoError(t, err)
	batch, err := q2.Receive(ctx, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	assert.Equal(t, "shared key", batch[0].Text)
}

func TestQueueNamesFollowTheServiceRules(t *testing.T) {
	t.Parallel()
	a := testAccount(t, nil)
	for _, bad := range []string{"", "ab", "Upper", "has_underscore", "-lead", "trail-", "dou--ble", strings.Repeat("a", 57)} {
		_, err := a.Queue(bad)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
	}
	for _, good := range []string{"abc", "a-b-c", "q1", strings.Repeat("a", 56)} {
		if len(good) < 3 {
			continue
		}
		q, err := a.Queue(good)
		require.NoError(t, err, "%q", good)
		assert.Equal(t, good+"-poison", q.PoisonQueue().Name())
	}
	q1, _ := a.Queue("same")
	q2, _ := a.Queue("same")
	assert.Same(t, q1, q2, "one *Queue per name, so listeners and publishers share it")
}

func TestStorageErrorLeavesTheSASOut(t *testing.T) {
	err := storageError(OpSend, "q", &url.Error{Op: "Put", URL: "http://user:pw@h/q?sv=1&sig=x", Err: context.DeadlineExceeded})
	assert.True(t, errors.Is(err, context.DeadlineExceeded))
	assert.NotContains(t, err.Error(), "sig=")
	assert.NotContains(t, err.Error(), "pw@")
	assert.Contains(t, err.Error(), "http://h/q")
}

// A call's arguments that the service would refuse are refused before any
// request, with one kind of error: a *ConfigError naming the argument,
// matching ErrInvalidConfig, as options are.
func TestArgumentErrorsAreConfigErrors(t *testing.T) {
	t.Parallel()
	q, err := NewQueueWithSAS("https://acct.queue.core.windows.net/orders?sv=1&sig=x", nil)
	require.NoError(t, err)
	sq, err := NewShardedQueue("s", []Shard{q}, nil)
	require.NoError(t, err)
	ctx := context.Background()
	for name, err := range map[string]error{
		"Receive's max":         func() error { _, err := q.Receive(ctx, 33, time.Second); return err }(),
		"Receive's visibility":  func() error { _, err := sq.Receive(ctx, 1, 0); return err }(),
		"SetVisibility's after": q.SetVisibility(ctx, &Delivery{ID: "m", Receipt: &popReceipt{queue: q, value: "r"}}, -time.Second),
		"Peek's max":            func() error { _, err := sq.Peek(ctx, 0); return err }(),
		"connection string":     func() error { _, err := NewAccountFromConnectionString("AccountName=a", nil); return err }(),
		"account key": func() error {
			_, err := NewAccountWithSharedKey("https://a.queue.core.windows.net", "a", "not base64!", nil)
			return err
		}(),
	} {
		var ce *ConfigError
		require.ErrorAs(t, err, &ce, name)
		assert.Equal(t, name, ce.Field)
		assert.ErrorIs(t, err, ErrInvalidConfig, name)
	}
}

// A URL without a SAS token, and an account opened with a service SAS
// scoped to one queue, are refused when made, saying what is missing and
// never quoting the URL. (Both were taken, and failed at the first request.)
func TestSASURLsAreCheckedWhenOpened(t *testing.T) {
	t.Parallel()
	_, err := NewQueueWithSAS("https://acct.queue.core.windows.net/orders", nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "carries no SAS token")

	_, err = NewAccountWithSAS("https://acct.queue.core.windows.net/", nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "carries no SAS token")

	_, err = NewAccountWithSAS("https://acct.queue.core.windows.net/?sv=2023-11-03&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET", nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "service SAS")
	assert.Contains(t, err.Error(), "NewQueueWithSAS")
	assert.NotContains(t, err.Error(), "S3CRET")

	_, err = NewAccountWithSAS("https://acct.queue.core.windows.net/?sv=2023-11-03&ss=q&srt=sco&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET", nil)
	assert.NoError(t, err, "an account SAS")
	_, err = NewQueueWithSAS("https://acct.queue.core.windows.net/orders?sv=2023-11-03&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET", nil)
	assert.NoError(t, err, "a service SAS for one queue")
	q, err := NewQueueWithSAS("http://127.0.0.1:10001/devstoreaccount1/orders?sv=2023-11-03&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET", nil)
	require.NoError(t, err, "an emulator's queue, path-style")
	assert.Equal(t, "orders", q.Name())
	q, err = NewQueueWithSAS("http://azurite:10001/devstoreaccount1/orders?sv=2023-11-03&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET", nil)
	require.NoError(t, err, "an emulator under a name of its own")
	assert.Equal(t, "orders", q.Name())

	// A URL that names no queue (an account's, with its SAS) was taken
	// as a queue named after the account, and every send got a 400.
	for _, u := range []string{
		"https://acct.queue.core.windows.net/?sv=2023-11-03&ss=q&srt=sco&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET",
		"http://127.0.0.1:10001/devstoreaccount1/?sv=2023-11-03&ss=q&srt=sco&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET",
		"https://acct.queue.core.windows.net/orders/messages/x?sv=2023-11-03&sp=raup&se=2030-01-01T00%3A00%3A00Z&sig=S3CRET",
	} {
		_, err = NewQueueWithSAS(u, nil)
		require.ErrorIs(t, err, ErrInvalidConfig, "%s", u)
		assert.Contains(t, err.Error(), "names no queue")
		assert.NotContains(t, err.Error(), "S3CRET")
	}
}

// A connection string is refused with what is wrong with it, never a
// value from it. (An empty string, garbage, one with no key and one whose
// key was not base64 all got one message, wrong for the last.)
func TestAConnectionStringSaysWhatIsWrongWithIt(t *testing.T) {
	t.Parallel()
	for cs, want := range map[string]string{
		"":                                  "empty",
		"garbage":                           "not Name=value settings",
		"AccountName=acct":                  "neither AccountName with AccountKey",
		"AccountName=acct;AccountKey=x!y*z": "AccountKey is not base64",
	} {
		_, err := NewAccountFromConnectionString(cs, nil)
		require.ErrorIs(t, err, ErrInvalidConfig, "%q", cs)
		assert.Contains(t, err.Error(), want, "%q", cs)
		assert.NotContains(t, err.Error(), "x!y*z")
	}
}

// A connection string read from a file, its end of line and all, is taken
// as it is meant: white space around it is no part of it.
func TestAConnectionStringWithAnEndOfLineIsTaken(t *testing.T) {
	needStorage(t)
	t.Parallel()
	a, err := NewAccountFromConnectionString("  "+connectionString(t)+"\r\n", nil)
	require.NoError(t, err)
	q, err := a.Queue(uniqueName(t))
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))
}
