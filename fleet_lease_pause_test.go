package azdispatch_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/azdispatch/azdispatch/internal/azurite"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch"
)

// envPausedHolder, set to a lease name, makes this test binary, run as
// TestLeasePausedHolderProcess, the holder that
// TestLeaseFenceRefusesAHolderPausedPastItsLease pauses.
const envPausedHolder = "AZDISPATCH_TEST_PAUSED_HOLDER"

// envConnectionString is the variable the test binary takes its emulator's
// account from.
const envConnectionString = "AZDISPATCH_CONNECTION_STRING"

// pausedLeaseOptions is the shortest lease the service allows, with quick
// tries, so that the takeover comes within seconds of the lease's expiry.
func pausedLeaseOptions() *azdispatch.LeaseOptions {
	return &azdispatch.LeaseOptions{Duration: 15 * time.Second, RenewEvery: 3 * time.Second, AcquireEvery: 500 * time.Millisecond}
}

// planBlob is the data the holders of the lease name write, fenced.
func planBlob(t testing.TB, connStr, name string) fencedBlob {
	t.Helper()
	c, err := container.NewClientFromConnectionString(connStr, "azdispatch-leases", nil)
	require.NoError(t, err)
	return fencedBlob{blob: c.NewBlockBlobClient(name + "-plan")}
}

// A holder paused past its lease resumes while another process holds the
// lease: the two overlap, and only the fence keeps the old holder's writes
// out. Holder A is a process of its own, and the pause is a real one: the
// operating system stops every thread of it (SIGSTOP on Unix,
// NtSuspendProcess on Windows), as a long garbage collection, a debugger or
// a frozen virtual machine would. Nothing in A runs meanwhile, so its
// renewals stop and nothing in it can notice that its lease is running out.
// Failing A's requests in-process would not do: its renewal loop would
// notice and cancel its function before the lease expired, and the two would
// never overlap.
//
// A has checked the data's fence and is about to write when it is stopped.
// B takes the lease once A's expires, with a greater fence, and writes. A
// resumes, and its write goes out before anything in A looks at its
// context, as a write already past its last look at the context would: the
// service refuses it because B changed the data, and A's next try is
// refused because B's fence is greater. B's data stands.
func TestLeaseFenceRefusesAHolderPausedPastItsLease(t *testing.T) {
	azurite.SkipUnlessLong(t)
	t.Parallel()
	ctx := context.Background()
	connStr := azdispatch.EmulatorConnectionString(t)
	name := fmt.Sprintf("paused-%d", time.Now().UnixNano())
	a := startChild(t, "holder A", "TestLeasePausedHolderProcess", envPausedHolder+"="+name, envConnectionString+"="+connStr)

	fenceA, err := strconv.ParseInt(a.expect(t, "fence"), 10, 64)
	require.NoError(t, err)
	require.NoError(t, pauseProcess(a.cmd.Process))
	paused := time.Now()

	account, err := azdispatch.NewAccountFromConnectionString(connStr, nil)
	require.NoError(t, err)
	b, err := azdispatch.NewLease(account, name, pausedLeaseOptions())
	require.NoError(t, err)
	plan := planBlob(t, connStr, name)
	var fenceB int64
	written, aDone, bResult := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	bCtx, cancelB := context.WithCancel(ctx)
	go func() {
		bResult <- b.Run(bCtx, func(ctx context.Context) error {
			fenceB, _ = azdispatch.LeaseFence(ctx)
			written <- plan.write(ctx, fenceB, []byte("B"))
			select { // hold the lease while A resumes: the two overlap
			case <-aDone:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	finishB := sync.OnceValue(func() error { // B's goroutine ends with its Run
		close(aDone)
		cancelB()
		return <-bResult
	})
	defer finishB() // whatever fails below
	select {
	case err := <-written:
		require.NoError(t, err, "B's fenced write")
	case <-time.After(2 * time.Minute):
		t.Fatal("B never took the lease of the paused holder")
	}
	t.Logf("B took the lease %v after A was paused", time.Since(paused).Round(time.Second))
	assert.Greater(t, fenceB, fenceA, "the next holder's fence is greater")

	_, err = io.WriteString(a.stdin, "write\n") // read once A runs again
	require.NoError(t, err)
	require.NoError(t, resumeProcess(a.cmd.Process))
	assert.Equal(t, "condition not met", a.expect(t, "write under way"), "the service refuses A's write: B changed the data")
	assert.Equal(t, "stale fence", a.expect(t, "write again"), "A's check refuses: B's fence is greater")
	assert.Equal(t, "true", a.expect(t, "lease lost"), "A's context ends with ErrOwnershipLost once A runs again")
	require.NoError(t, a.wait(), "holder A's process")
	require.NoError(t, finishB(), "B's Run")

	got, err := plan.blob.DownloadStream(ctx, nil)
	require.NoError(t, err)
	defer got.Body.Close()
	body, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	assert.Equal(t, "B", string(body), "B's data stands")
}

// TestLeasePausedHolderProcess is holder A of the test above, when that
// test runs this binary with envPausedHolder set; otherwise it does
// nothing. It reports on stdout, one "child: <what>: <value>" line at a
// time.
func TestLeasePausedHolderProcess(t *testing.T) {
	name := os.Getenv(envPausedHolder)
	if name == "" {
		return // not a process started by the test above
	}
	ctx := context.Background()
	connStr := os.Getenv(envConnectionString)
	account, err := azdispatch.NewAccountFromConnectionString(connStr, nil)
	require.NoError(t, err)
	lease, err := azdispatch.NewLease(account, name, pausedLeaseOptions())
	require.NoError(t, err)
	plan := planBlob(t, connStr, name)
	say := func(what string, v any) { fmt.Printf("child: %s: %v\n", what, v) }
	stdin := bufio.NewReader(os.Stdin)

	err = lease.Run(ctx, func(ctx context.Context) error {
		fence, _ := azdispatch.LeaseFence(ctx)
		cond, err := plan.check(ctx, fence) // checked, about to write...
		if err != nil {
			return err
		}
		say("fence", fence)
		if _, err := stdin.ReadString('\n'); err != nil { // ...and stopped here by the test
			return err
		}
		wctx := context.WithoutCancel(ctx) // past its last look at ctx
		say("write under way", outcome(plan.put(wctx, fence, []byte("A"), cond)))
		say("write again", outcome(plan.write(wctx, fence, []byte("A"))))
		<-ctx.Done()
		say("lease lost", errors.Is(context.Cause(ctx), azdispatch.ErrOwnershipLost))
		return nil
	})
	require.ErrorIs(t, err, azdispatch.ErrOwnershipLost)
}

// outcome names how a fenced write ended.
func outcome(err error) string {
	switch {
	case err == nil:
		return "written"
	case errors.Is(err, errStaleFence):
		return "stale fence"
	case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobAlreadyExists):
		return "condition not met" // If-Match, or If-None-Match for data not written before
	}
	return err.Error()
}
