package cpubusy

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBusyWhileGoroutinesWaitForACore keeps three times as many goroutines
// spinning as there are cores: some always wait. Once they stop, none do.
// The tests of this package run one at a time, so nothing else runs.
func TestBusyWhileGoroutinesWaitForACore(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	var spinning sync.WaitGroup
	for range 3 * runtime.GOMAXPROCS(0) {
		spinning.Go(func() {
			for ctx.Err() == nil {
			}
		})
	}
	busy := assert.Eventually(t, Busy, 30*time.Second, time.Millisecond, "goroutines wait for a core")
	stop()
	spinning.Wait()
	require.True(t, busy)
	assert.Eventually(t, func() bool { return !Busy() }, 30*time.Second, time.Millisecond, "none wait once they stop")
}

func BenchmarkBusy(b *testing.B) {
	for b.Loop() {
		Busy()
	}
}
