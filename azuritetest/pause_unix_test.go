//go:build unix

package azuritetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// A paused emulator answers nothing: a request waits for its deadline; once
// resumed, it answers again.
func TestAPausedServerHangsUntilResumed(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	emulator := azuritetest.Start(t, nil)
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue("work")
	require.NoError(t, err)
	require.NoError(t, q.Create(context.Background()))

	require.NoError(t, emulator.Pause())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = q.Depth(ctx)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "hangs until the deadline: %v", err)
	require.NoError(t, emulator.Resume())
	_, err = q.Depth(context.Background())
	assert.NoError(t, err)
}
