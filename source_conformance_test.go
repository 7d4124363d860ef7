package azdispatch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/conformance"
	"github.com/azdispatch/azdispatch/sourcetest"
)

// TestConformanceAzurite runs the Source conformance suite, package
// sourcetest, against Azurite through an azdispatch.Account and its Queues
// (or against the account that AZDISPATCH_CONNECTION_STRING names, with
// the service's Behaviour when it is not the emulator). memqueue runs the same suite in its own tests, so
// the two are checked to agree. It skips under -short, like every test that
// needs Azurite.
func TestConformanceAzurite(t *testing.T) {
	t.Parallel()
	cs := azdispatch.EmulatorConnectionString(t)
	account, err := azdispatch.NewAccountFromConnectionString(cs, nil)
	require.NoError(t, err)
	h := &conformance.AccountHarness{Account: account, Behave: sourcetest.ForConnectionString(cs)}
	sourcetest.Run(t, h)
	sourcetest.RunListener(t, h)
}

// TestConformanceListenerMemqueue runs the suite's listener outcomes over
// memqueue, so that a run with -short, which needs no Node, still takes a
// Listener through every outcome end to end.
func TestConformanceListenerMemqueue(t *testing.T) {
	t.Parallel()
	sourcetest.RunListener(t, &conformance.MemHarness{})
}
