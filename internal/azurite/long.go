package azurite

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// EnvLong names a variable that, when set to 1 (CI sets it), runs the long
// tests too: soaks, storms and hangs that last tens of seconds each, and
// leases that must run out. go test ./... leaves them out so that the
// suite finishes in about a minute; each of them says so when it skips.
const EnvLong = "AZDISPATCH_LONG"

// Long reports whether this run includes the long tests (see EnvLong).
func Long() bool { return os.Getenv(EnvLong) == "1" }

// SkipUnlessLong is called first by a long test: it skips tb unless EnvLong
// is set, and fails it instead when EnvRequire is set without EnvLong, so
// that a run meant to test everything can never pass with a long test
// quietly left out.
func SkipUnlessLong(tb testing.TB) {
	tb.Helper()
	if Long() {
		return
	}
	if os.Getenv(EnvRequire) != "" {
		tb.Fatalf("a long test, but %s is set without %s=1: set both to run everything", EnvRequire, EnvLong)
	}
	tb.Skipf("a long test: runs with %s=1, as CI sets", EnvLong)
}

// WidenParallel lets more of a package's parallel tests run at once than
// the machine has cores (go test's default), unless -parallel was given or
// the long tests run: tests against an emulator spend their time waiting on
// it and on timers, not computing, so a 2-core machine would otherwise run
// two at a time and sit idle. The long tests hold the emulator to bounds of
// a second or two (a hung account is told from a slow one by a 2 s
// deadline), which a crowded emulator would break by chance, so with them
// the default stands; under -short no test waits on an emulator, and the
// rest compute, so there too. Call it from TestMain after flag.Parse.
func WidenParallel() {
	if Long() || testing.Short() {
		return
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); f != nil && !given {
		_ = f.Value.Set(strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
}
