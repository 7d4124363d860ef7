package azdispatch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An example, tests included, copies into a module of its own: none of its
// files imports a package of this module's internal/ tree, which Go would
// refuse there.
func TestTheExamplesImportNothingInternal(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("examples", "*", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NotContains(t, string(text), `"github.com/azdispatch/azdispatch/internal/`, "%s imports an internal package", f)
	}
}
