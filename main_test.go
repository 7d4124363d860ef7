package azdispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/v2/sas"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// TestMain runs the package's tests and examples. Azurite is started by the
// first test or example that touches storage (each uses queues of its own)
// and stopped at the end, after which no goroutine may be left running.
// With -short, tests that touch storage skip and examples are left out, so
// the run needs no Node; without it, a missing Azurite fails the run with
// advice on how to get it, and never skips.
func TestMain(m *testing.M) {
	flag.Parse()
	azurite.WidenParallel()
	left, err := azurite.ShortRunError()
	if err != nil {
		fmt.Fprintln(os.Stderr, "azdispatch tests:", err)
		os.Exit(1)
	}
	if left {
		skipExamples()
	}
	code := m.Run()
	stopSpareEmulators()
	if second.inst != nil {
		if err := second.inst.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the second Azurite:", err)
		}
	}
	// A process a test started (see childProc) uses its parent's
	// emulator, which keeps this process's idle connections open: as an
	// emulator it did not start.
	external := emulator.inst == nil && os.Getenv(azurite.EnvConnectionString) != ""
	if emulator.inst != nil {
		external = emulator.inst.External()
		if err := emulator.inst.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Azurite:", err)
		}
	}
	// Only a run that passed is checked: a failed test may have left its
	// goroutines behind, and would only add noise to its failure.
	if code == 0 {
		if err := goroutinesLeft(external); err != nil {
			fmt.Fprintln(os.Stderr, "azdispatch tests passed but left goroutines running:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// emulator is the package's Azurite, started once on first use.
var emulator struct {
	once sync.Once
	inst *azurite.Instance
	err  error
}

// startEmulator starts the package's Azurite (or adopts the account that
// AZDISPATCH_CONNECTION_STRING names) and exports its connection string
// there for the examples. It returns the connection string.
func startEmulator() (string, error) {
	emulator.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		emulator.inst, emulator.err = azurite.Start(ctx, nil)
		if emulator.err != nil {
			msg := emulator.err.Error()
			if !strings.Contains(msg, azurite.HowTo) {
				emulator.err = fmt.Errorf("%w\n%s", emulator.err, azurite.HowTo)
			}
			return
		}
		os.Setenv(azurite.EnvConnectionString, emulator.inst.ConnectionString())
	})
	if emulator.err != nil {
		return "", emulator.err
	}
	return emulator.inst.ConnectionString(), nil
}

// StartTestEmulator is startEmulator for the examples, which live in package
// azdispatch_test: it exists only in the test binary.
func StartTestEmulator() {
	if _, err := startEmulator(); err != nil {
		panic("azdispatch examples need Azurite: " + err.Error())
	}
}

// needStorage skips t under -short (see azurite.SkipIfShort) and otherwise
// starts Azurite, failing t with advice on how to get it if that is
// impossible.
func needStorage(t testing.TB) {
	t.Helper()
	azurite.SkipIfShort(t)
	if _, err := startEmulator(); err != nil {
		t.Fatalf("azdispatch tests need Azurite: %v", err)
	}
}

// EmulatorConnectionString is the test Azurite's connection string, for the
// package's external tests (see needStorage). It exists only in the test
// binary.
func EmulatorConnectionString(t testing.TB) string {
	t.Helper()
	return connectionString(t)
}

// connectionString is the test Azurite's connection string.
func connectionString(t testing.TB) string {
	t.Helper()
	return emulatorFor(t).ConnectionString()
}

// emulatorFor is the Azurite that t's tests use: the package's, or, for
// about half of the top-level tests (picked by name, so that a test and
// its subtests share one), a second process. Azurite serves on one core
// and stalls now and then to clean up what was deleted; two processes
// serve the parallel tests on two cores, and each stalls for half as long.
// With an account of the developer's own (AZDISPATCH_CONNECTION_STRING),
// every test uses it.
func emulatorFor(t testing.TB) *azurite.Instance {
	t.Helper()
	needStorage(t)
	if emulator.inst.External() {
		return emulator.inst
	}
	h := fnv.New32a()
	h.Write([]byte(strings.SplitN(t.Name(), "/", 2)[0]))
	if h.Sum32()%2 == 0 {
		return emulator.inst
	}
	second.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		second.inst, second.err = azurite.Start(ctx, &azurite.Options{Fresh: true})
	})
	require.NoError(t, second.err, azurite.HowTo)
	return second.inst
}

// second is the package's second Azurite (see emulatorFor), started on
// first need and stopped by TestMain.
var second struct {
	once sync.Once
	inst *azurite.Instance
	err  error
}

// skipExamples adds every example to -test.skip: they all touch storage.
func skipExamples() {
	skip := "^Example"
	if f := flag.Lookup("test.skip"); f != nil {
		if old := f.Value.String(); old != "" {
			skip = old + "|" + skip
		}
		_ = f.Value.Set(skip)
	}
}

// testAccount opens the emulator's account with a client of its own, so that
// its transaction counts belong to the test.
func testAccount(t testing.TB, opts *AccountOptions) *Account {
	t.Helper()
	a, err := NewAccountFromConnectionString(connectionString(t), opts)
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

// testQueue returns a new, empty queue in an account of its own. The queue
// exists (a listener does not create its queue): it is created through
// another client, so that the queue's and the account's counters start at
// zero.
func testQueue(t testing.TB) *Queue {
	t.Helper()
	name := uniqueName(t)
	q, err := testAccount(t, nil).Queue(name)
	require.NoError(t, err)
	createQueue(t, name)
	return q
}

// createQueue creates the queue called name through a client of its own.
func createQueue(t testing.TB, name string) {
	t.Helper()
	q, err := testAccount(t, nil).Queue(name)
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))
}

// faultTransport wraps the HTTP transport and fails the requests fail picks
// with a 503 ServerBusy, as a throttled account would.
type faultTransport struct {
	next policy.Transporter
	fail func(*http.Request) bool
	hits atomic.Int64
}

func (f *faultTransport) Do(req *http.Request) (*http.Response, error) {
	if f.fail != nil && f.fail(req) {
		f.hits.Add(1)
		return serverBusy(req), nil
	}
	return f.next.Do(req)
}

// serverBusy is the service's answer when it throttles: 503 ServerBusy.
func serverBusy(req *http.Request) *http.Response {
	body := `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>injected</Message></Error>`
	return &http.Response{
		StatusCode: http.StatusServiceUnavailable, Status: "503 Server Busy",
		Header: http.Header{"X-Ms-Error-Code": {"ServerBusy"}, "Content-Type": {"application/xml"}},
		Body:   io.NopCloser(strings.NewReader(body)), Request: req, ContentLength: int64(len(body)),
	}
}

// faultyAccount opens the emulator with f between the SDK and the network,
// and SDK retries without delay so tests stay quick.
func faultyAccount(t testing.TB, f *faultTransport, maxRetries int32) *Account {
	t.Helper()
	f.next = newHTTPClient()
	return testAccount(t, faultyAccountOptions(f, maxRetries))
}

// faultyAccountOptions are faultyAccount's options, for tests that add to them.
func faultyAccountOptions(f *faultTransport, maxRetries int32) *AccountOptions {
	return &AccountOptions{Client: &azqueue.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: f,
		Retry:     policy.RetryOptions{MaxRetries: maxRetries, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond},
	}}}
}

// sendTexts puts n texts made by text(i) on q.
func sendTexts(t testing.TB, q *Queue, n int, text func(i int) string) {
	t.Helper()
	for i := range n {
		_, err := q.Send(context.Background(), text(i), nil)
		require.NoError(t, err)
	}
}

// atomic32 is a countdown shared between a test and its fault transport.
type atomic32 struct{ n atomic.Int32 }

func (a *atomic32) set(n int32) { a.n.Store(n) }

// dec counts down and reports whether the count had not run out.
func (a *atomic32) dec() bool { return a.n.Add(-1) >= 0 }

func sasResources() sas.AccountResourceTypes {
	return sas.AccountResourceTypes{Service: true, Container: true, Object: true}
}

func sasPermissions() sas.AccountPermissions {
	return sas.AccountPermissions{Read: true, Write: true, Delete: true, List: true, Add: true, Create: true, Update: true, Process: true}
}

// EncodeEnvelopeForTest is PoisonEnvelope.encode, for the external tests
// that write envelopes as a listener would.
func EncodeEnvelopeForTest(e *PoisonEnvelope) (string, error) { return e.encode() }

// SyncBuffer is syncBuffer, for the external tests that capture logs.
type SyncBuffer = syncBuffer

// long marks a test that lasts tens of seconds (a soak, a storm, a hang, a
// lease that must run out): see azurite.SkipUnlessLong.
func long(t testing.TB) {
	t.Helper()
	azurite.SkipUnlessLong(t)
}
