//go:build unix

package azdispatch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A sharded queue over two emulators, one of which is stopped (SIGSTOP: it
// accepts connections and never answers) for the hang, routes around it:
// see checkHungAccount.
func TestAShardedQueueRoutesAroundAPausedEmulator(t *testing.T) {
	azurite.SkipUnlessLong(t)
	t.Parallel()
	healthy, err := azdispatch.NewAccountFromConnectionString(azdispatch.EmulatorConnectionString(t), nil)
	require.NoError(t, err)
	spare := spareEmulator(t)
	hung, err := azdispatch.NewAccountFromConnectionString(spare.ConnectionString(), nil)
	require.NoError(t, err)
	rep := runHungAccount(t, healthy, hung,
		func() { require.NoError(t, spare.Pause()) },
		func() { require.NoError(t, spare.Resume()) })
	checkHungAccount(t, rep)
}
