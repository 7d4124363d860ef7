package azurite

import (
	"fmt"
	"os"
	"testing"
)

// EnvRequire names a variable that, when set (CI sets it), forbids leaving
// out the tests that need Azurite: under -short they then fail instead of
// skipping, so that a run which was meant to test storage can never pass
// with those tests quietly skipped.
const EnvRequire = "AZDISPATCH_REQUIRE_AZURITE"

// ShortRunError reports whether this run leaves out the tests that need
// Azurite (go test -short, which promises a run without Node.js) and, if
// EnvRequire forbids that, the error to fail with. left is false when the
// tests run.
func ShortRunError() (left bool, err error) {
	if !testing.Short() {
		return false, nil
	}
	if os.Getenv(EnvRequire) != "" {
		return true, fmt.Errorf("-short leaves out the tests that need Azurite, but %s is set: run without -short", EnvRequire)
	}
	return true, nil
}

// SkipIfShort is called first by every test that starts or uses Azurite.
// Under -short it skips tb, or fails it when EnvRequire is set; otherwise it
// returns and the test goes on to start the emulator, failing (never
// skipping) with HowTo advice if it cannot.
func SkipIfShort(tb testing.TB) {
	tb.Helper()
	left, err := ShortRunError()
	switch {
	case err != nil:
		tb.Fatal(err)
	case left:
		tb.Skip("needs Azurite (Node.js); run without -short")
	}
}
