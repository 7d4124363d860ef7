package azdispatch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/records"
	"github.com/azdispatch/azdispatch/internal/records/recordstest"
)

// TestConformanceRecordsAzurite checks the records a scheduler and a
// listener keep in a payload store's blobs against Azurite, with the
// suite that memqueue's records in memory pass too.
func TestConformanceRecordsAzurite(t *testing.T) {
	t.Parallel()
	recordstest.Run(t, func(t *testing.T) records.Store {
		store, err := testAccount(t, nil).PayloadStore(uniqueName(t))
		require.NoError(t, err)
		return recordsOf(store)
	})
}
