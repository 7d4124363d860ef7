package azdispatch

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/netx"
)

// A listener whose endpoint refuses connections (nothing listens: a dead
// emulator, a wrong port) is not ready within seconds, not after the SDK's
// retries of three receives (about 30 s): a refused connection is failed
// at once, and the listener's own back-off retries it. The figure is
// logged; the bound leaves room for a loaded machine.
func TestADeadEndpointIsNoticedWithinSeconds(t *testing.T) {
	addr, err := netx.UnusedAddr()
	require.NoError(t, err)
	acct, err := NewAccountWithSharedKey("http://"+addr+"/devstoreaccount1", "devstoreaccount1", emulatorKey, nil)
	require.NoError(t, err)
	q, err := acct.Queue("orders")
	require.NoError(t, err)
	lis, err := NewListener(q, func(context.Context, *Message[int]) error { return nil }, nil)
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() { _ = lis.Run(ctx) })
	defer func() { stop(); run.Wait() }()

	// Ready is read once a look: before Run has started it says not
	// running, then ready until the receives have failed in a row.
	start := time.Now()
	var notReady error
	for {
		err := lis.Ready()
		if err != nil && strings.Contains(err.Error(), "receives failed in a row") {
			notReady = err
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("still ready after a minute: %+v", lis.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("not ready %v after start, after %d receives: %v", took.Round(time.Millisecond), lis.State().ReceiveErrors, notReady)
	assert.Less(t, took, 10*time.Second, "against about 30 s with the SDK's retries")
	assert.ErrorIs(t, notReady, ErrNotReady)
	assert.EqualValues(t, lis.State().ReceiveErrors, lis.State().Transactions.Receive, "one attempt per receive: no SDK retry")
}
