package endpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"github.com/azdispatch/azdispatch/internal/storagefault"
)

// The tests that read queues run against Azurite processes of their own,
// started on first use: two of them, two accounts, for a sharded queue
// spread over both. Under -short they are left out (see
// azurite.ShortRunError); otherwise a missing Azurite fails them.
func TestMain(m *testing.M) {
	flag.Parse()
	azurite.WidenParallel()
	if _, err := azurite.ShortRunError(); err != nil {
		fmt.Fprintln(os.Stderr, "endpoint tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	for _, inst := range emulators.insts {
		if inst != nil {
			_ = inst.Stop()
		}
	}
	os.Exit(code)
}

var emulators struct {
	once  sync.Once
	insts [2]*azurite.Instance
	err   error
}

// connectionString is the connection string of emulator i (0 or 1).
func connectionString(t testing.TB, i int) string {
	t.Helper()
	azurite.SkipIfShort(t)
	emulators.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for k := range emulators.insts {
			opts := &azurite.Options{Fresh: k > 0} // the second is always a process of its own
			if emulators.insts[k], emulators.err = azurite.Start(ctx, opts); emulators.err != nil {
				emulators.err = fmt.Errorf("%w\n%s", emulators.err, azurite.HowTo)
				return
			}
		}
	})
	if emulators.err != nil {
		t.Fatalf("endpoint tests need Azurite: %v", emulators.err)
	}
	return emulators.insts[i].ConnectionString()
}

// account opens emulator i's account with a client of its own, so that its
// transaction counts belong to the test.
func account(t testing.TB, i int, opts *azdispatch.AccountOptions) *azdispatch.Account {
	t.Helper()
	a, err := azdispatch.NewAccountFromConnectionString(connectionString(t, i), opts)
	require.NoError(t, err)
	return a
}

// uniqueName returns a fresh queue name, so tests can run in parallel.
func uniqueName(t testing.TB) string {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "t" + hex.EncodeToString(b)
}

// newQueue returns a new, empty queue called name in account a, created
// through a client of its own so that a's counts start at zero.
func newQueue(t testing.TB, a *azdispatch.Account, i int, name string) *azdispatch.Queue {
	t.Helper()
	creator, err := account(t, i, nil).Queue(name)
	require.NoError(t, err)
	require.NoError(t, creator.Create(context.Background()))
	q, err := a.Queue(name)
	require.NoError(t, err)
	return q
}

// testQueue returns a new, empty queue in emulator 0.
func testQueue(t testing.TB) *azdispatch.Queue {
	t.Helper()
	return newQueue(t, account(t, 0, nil), 0, uniqueName(t))
}

// send puts n copies of text on q.
func send(t testing.TB, q azdispatch.Target, n int, text string) {
	t.Helper()
	for range n {
		_, err := q.Send(context.Background(), text, nil)
		require.NoError(t, err)
	}
}

// answeringAccount opens emulator 0 with answer in front of it (see
// storagefault.Transport) and no SDK retries, so that each call is one
// HTTP attempt.
func answeringAccount(t testing.TB, answer func(*http.Request) *http.Response) *azdispatch.Account {
	t.Helper()
	return account(t, 0, &azdispatch.AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: &storagefault.Transport{Answer: answer},
		Retry:     policy.RetryOptions{MaxRetries: -1, RetryDelay: time.Millisecond},
	}}})
}

// quick is listener options for tests: a short idle back-off (up to
// 200 ms) and a short drain.
func quick() *azdispatch.ListenerOptions {
	return &azdispatch.ListenerOptions{
		Scaling: azdispatch.ScalingOptions{
			Idle: azdispatch.ExponentialIdle(0, 200*time.Millisecond),
		},
		DrainTimeout: time.Second,
	}
}
