package azdispatch

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heapChildEnv marks the process that measures its own heap.
const heapChildEnv = "AZDISPATCH_HEAP_CHILD"

// A flood of large payloads stays within ListenerOptions.PayloadMemory: the
// heap, sampled while 24 messages of 6 MiB each are handled, stays under
// the budget plus 32 MiB. Without a budget the same flood takes several
// times as much. The measurement runs in a process of its own, so that the
// other tests' allocations do not count.
func TestPayloadMemoryBoundsTheHeap(t *testing.T) {
	if os.Getenv(heapChildEnv) != "" {
		measurePayloadHeap(t)
		return
	}
	t.Parallel()
	connectionString(t) // the emulator, shared with the child through the environment
	cmd := exec.Command(os.Args[0], "-test.run=^TestPayloadMemoryBoundsTheHeap$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), heapChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "peak heap") {
			t.Log(strings.TrimSpace(line))
		}
	}
	require.NoError(t, err, "the measuring process failed:\n%s", out)
}

func measurePayloadHeap(t *testing.T) {
	messages, size, budget, margin := 24, 6<<20, int64(64<<20), int64(32<<20)
	if raceEnabled {
		// Under the race detector every byte costs some twenty times as
		// much CPU (gzip, base64, the blob transfer), and the full-size run
		// takes minutes: the same flood at a quarter of the scale, which
		// still overruns the budget several times over without it.
		size, budget, margin = size/4, budget/4, margin/4
	}
	debug.SetGCPercent(10) // garbage would otherwise count as heap
	bounded := peakPayloadHeap(t, messages, size, budget)
	unbounded := peakPayloadHeap(t, messages, size, -1)
	fmt.Printf("peak heap above baseline: %d MiB with PayloadMemory %d MiB (bound %d MiB); %d MiB without a budget\n",
		bounded>>20, budget>>20, (budget+margin)>>20, unbounded>>20)
	require.Less(t, bounded, uint64(budget+margin))
}

// peakPayloadHeap sends n offloaded messages of size bytes, handles them
// with a listener whose PayloadMemory is budget, and returns the highest
// heap seen above the heap before the listener started.
func peakPayloadHeap(t *testing.T, n, size int, budget int64) uint64 {
	ctx := context.Background()
	q := testQueue(t)
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	raw := make([]byte, size*3/4)
	for range n {
		_, err := rand.Read(raw)
		require.NoError(t, err)
		_, err = p.Send(ctx, base64.StdEncoding.EncodeToString(raw)) // about 6 MiB that gzip hardly shrinks
		require.NoError(t, err)
	}
	raw = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	var handled atomic.Int64
	cfg := quick()
	cfg.Codec = Raw()
	cfg.PayloadMemory = budget
	l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
		time.Sleep(300 * time.Millisecond) // hold it: the flood piles up
		handled.Add(1)
		return nil
	}, cfg)
	require.NoError(t, err)
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
				peak.Store(ms.HeapAlloc - base)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	stop := started(t, l)
	waitFor(t, "every message handled", func() bool { return handled.Load() == int64(n) && l.State().Succeeded == int64(n) })
	require.NoError(t, stop())
	close(stopSampling)
	sampling.Wait()
	require.Zero(t, l.State().PayloadBytes, "every reservation given back")
	return peak.Load()
}
