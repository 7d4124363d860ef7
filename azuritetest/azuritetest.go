// Package azuritetest runs Azurite, the Azure Storage emulator, for the
// tests of a program that uses azdispatch, as net/http/httptest runs an
// HTTP server: on free ports, private to the test, stopped when it ends.
//
//	func TestOrders(t *testing.T) {
//		emulator := azuritetest.Start(t, nil)
//		account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
//		…
//	}
//
// Azurite needs Node.js (20 or later) and npm on PATH. The pinned version
// azdispatch's own tests use is installed from npm on first use, into the
// user's cache directory (AZDISPATCH_AZURITE_CACHE overrides it), once for
// every test binary and process: a test that cannot get it fails, saying
// how to get Node, and never skips.
//
// A [Server] can serve several storage accounts, for a
// [github.com/azdispatch/azdispatch.ShardedQueue] over accounts: the first
// is Azurite's well-known devstoreaccount1, the others devstoreaccount2,
// devstoreaccount3, … with keys of their own. All share one process, so
// they share its throughput; a load test wants a process per account.
//
// Two kinds of failure that matter to a queue-based service can be staged:
// a service clock far from the test machine's ([Options.ClockOffset],
// [Server.SetClockOffset]), and an account that stops answering without
// refusing ([Server.Pause]).
package azuritetest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/azdispatch/azdispatch/internal/azurite"
)

// howTo says what running Azurite takes.
const howTo = "Running Azurite needs Node.js >= 20 and npm on PATH (https://nodejs.org/), " +
	"and the npm registry on first use (it installs azurite@3.37.0 into the user's cache directory, " +
	"or " + azurite.EnvCacheDir + ")."

// Options configures a [Server]. Nil means one account.
type Options struct {
	// Accounts is how many storage accounts the emulator serves. Zero
	// means one.
	Accounts int
	// Log, if set, receives the emulator's output, a line at a time.
	Log io.Writer
	// ClockOffset runs the emulator on a clock this far from the test
	// machine's (ahead if positive), from its first answer: every time it
	// reports (Date headers, errors' included; insertion, expiry and
	// visibility times; Last-Modified) is moved, so that a test sees what a
	// process whose clock is off sees. Zero runs it on the real clock, and
	// [Server.SetClockOffset] then cannot move it.
	ClockOffset time.Duration
}

// Server is a running private Azurite. Its methods are safe for concurrent
// use.
type Server struct {
	inst *azurite.Instance
}

// Start starts a Server for tb, and stops it when tb and its subtests end.
// It fails tb, with how to get Node, if Azurite cannot be installed or
// started.
func Start(tb testing.TB, opts *Options) *Server {
	tb.Helper()
	s, err := New(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return s
}

// New starts a Server where there is no testing.TB, such as a TestMain;
// ctx bounds its installation and start. Close stops it.
func New(ctx context.Context, opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Accounts < 0 {
		return nil, fmt.Errorf("azuritetest: Options.Accounts is %d, less than 0", o.Accounts)
	}
	inst, err := azurite.Start(ctx, &azurite.Options{Fresh: true, Accounts: o.Accounts, Log: o.Log, ClockOffset: o.ClockOffset})
	if err != nil {
		// The project's own advice names a variable this package does not
		// read (it always starts its own emulator): say what applies here.
		msg := strings.ReplaceAll(err.Error(), azurite.HowTo, "")
		return nil, fmt.Errorf("azuritetest: %s\n%s", strings.TrimSpace(msg), howTo)
	}
	return &Server{inst: inst}, nil
}

// Accounts is how many storage accounts the server serves.
func (s *Server) Accounts() int { return s.inst.Accounts() }

// ConnectionString is the connection string of account i (0 to
// Accounts()-1), blob and queue endpoints included, for
// [github.com/azdispatch/azdispatch.NewAccountFromConnectionString] or the
// Azure SDKs. It holds the account's key: it is the emulator's, but do not
// log it all the same.
func (s *Server) ConnectionString(i int) string {
	if i < 0 || i >= s.Accounts() {
		panic(fmt.Sprintf("azuritetest: account %d of %d", i, s.Accounts()))
	}
	return s.inst.AccountConnectionString(i)
}

// Close stops the emulator and removes what it stored. Start's Server is
// closed when its test ends.
func (s *Server) Close() error { return s.inst.Stop() }

// SetClockOffset moves the emulator's clock to the real time plus offset,
// within 20 ms: to step past a delay or an expiry without waiting for it.
// It needs a Server started with [Options.ClockOffset] (any nonzero value,
// a nanosecond for the real time).
func (s *Server) SetClockOffset(offset time.Duration) error {
	if err := s.inst.SetClockOffset(offset); err != nil {
		return fmt.Errorf("azuritetest: %w", err)
	}
	return nil
}

// Pause stops the emulator's process without ending it, until Resume: it
// accepts connections and answers nothing, as an account behind a
// blackholed connection does (requests hang until their deadline, rather
// than fail). Unix only: it fails on Windows.
func (s *Server) Pause() error {
	if err := s.inst.Pause(); err != nil {
		return fmt.Errorf("azuritetest: %w", err)
	}
	return nil
}

// Resume lets a paused emulator answer again; requests it took meanwhile
// are then served.
func (s *Server) Resume() error {
	if err := s.inst.Resume(); err != nil {
		return fmt.Errorf("azuritetest: %w", err)
	}
	return nil
}
