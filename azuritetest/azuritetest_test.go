package azuritetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
	"github.com/azdispatch/azdispatch/azuritetest"
	"github.com/azdispatch/azdispatch/internal/azurite"
)

// Two accounts in one emulator: each has its own queues, and each
// connection string reaches its own.
func TestTwoAccountsEachWithTheirOwnQueues(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	emulator := azuritetest.Start(t, &azuritetest.Options{Accounts: 2})
	require.Equal(t, 2, emulator.Accounts())
	ctx := context.Background()
	var depths []int
	for i := range 2 {
		account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(i), nil)
		require.NoError(t, err)
		q, err := account.Queue("work")
		require.NoError(t, err)
		require.NoError(t, q.Create(ctx))
		for range i + 1 {
			_, err := q.Send(ctx, "hello", nil)
			require.NoError(t, err)
		}
		depth, err := q.Depth(ctx)
		require.NoError(t, err)
		depths = append(depths, depth)
	}
	assert.Equal(t, []int{1, 2}, depths, "the same queue name in two accounts is two queues")
	assert.NotEqual(t, emulator.ConnectionString(0), emulator.ConnectionString(1))
}

func TestAccountOutOfRangePanics(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	emulator := azuritetest.Start(t, nil)
	assert.Panics(t, func() { emulator.ConnectionString(1) })
}

// A user's module imports this package as its own tests would: the
// integration test in examples/integration, a module of its own, runs
// with go test there and passes. (Run from here so that this module's
// go test ./... covers it.)
func TestAUserModuleTestsAgainstAzurite(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "examples", "integration"))
	require.NoError(t, err)
	// A nested module is not part of this module's zip: run from the
	// module cache, this test has nothing to run, and says so by failing
	// rather than passing unseen.
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err, "the example module examples/integration is missing: run this test from the repository")
	args := []string{"test", "-count=1"}
	if deadline, ok := t.Deadline(); ok {
		args = append(args, "-timeout", time.Until(deadline).Round(time.Second).String())
	}
	// The go command that runs this test, not whichever is first on PATH.
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if runtime.GOOS == "windows" {
		gocmd += ".exe"
	}
	cmd := exec.CommandContext(t.Context(), gocmd, append(args, "./...")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	// A change of this module's dependencies needs the same in that
	// module's go.mod: the go command then asks for go mod tidy there.
	require.NoError(t, err, "go test in %s (after a change of dependencies, run go mod tidy there):\n%s", dir, out)
	t.Logf("%s", out)
}

// An emulator whose clock is off from the first answer, moved later: a
// queue's service time follows it.
func TestAServerOnAMovedClock(t *testing.T) {
	azurite.SkipIfShort(t)
	t.Parallel()
	emulator := azuritetest.Start(t, &azuritetest.Options{ClockOffset: -3 * time.Hour})
	account, err := azdispatch.NewAccountFromConnectionString(emulator.ConnectionString(0), nil)
	require.NoError(t, err)
	q, err := account.Queue("work")
	require.NoError(t, err)
	_, err = q.Send(context.Background(), "hello", nil)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(-3*time.Hour), q.ServiceTime(), 3*time.Second)
	require.NoError(t, emulator.SetClockOffset(24*time.Hour))
	require.Eventually(t, func() bool {
		_, err := q.Depth(context.Background())
		return err == nil && q.ServiceTime().After(time.Now().Add(23*time.Hour))
	}, 10*time.Second, 50*time.Millisecond)

	plain := azuritetest.Start(t, nil)
	assert.Error(t, plain.SetClockOffset(time.Hour), "a server on the real clock cannot be moved")
}
