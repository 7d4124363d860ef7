package azdispatch

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"math"
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

// payloadHeapFull runs TestPayloadMemoryBoundsTheHeap at the scale of a
// real container: 200 messages of 2 MiB against the default PayloadMemory
// of 256 MiB. Without it the test runs the same flood at a quarter of the
// scale (80 messages against 64 MiB), which takes a few seconds.
var payloadHeapFull = flag.Bool("payload-heap-full", false, "TestPayloadMemoryBoundsTheHeap: 200 messages of 2 MiB against the default 256 MiB budget")

// A flood of large payloads held by their handlers, at the default GC
// settings, keeps the heap within what PayloadMemory documents: at most
// 1.25 × PayloadMemory above the heap before the flood (the listener keeps
// the payloads it holds to what the collector's headroom allows: see
// ListenerOptions.Payloads.Memory). The measurement runs in a process of its
// own, so that the other tests' allocations do not count.
func TestPayloadMemoryBoundsTheHeap(t *testing.T) {
	long(t)
	if os.Getenv(heapChildEnv) != "" {
		measurePayloadHeap(t)
		return
	}
	t.Parallel()
	connectionString(t) // the emulator, shared with the child through the environment
	args := []string{"-test.run=^TestPayloadMemoryBoundsTheHeap$", "-test.v", "-test.count=1"}
	if *payloadHeapFull {
		args = append(args, "-payload-heap-full")
	}
	cmd := exec.Command(os.Args[0], args...)
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
	messages, size, budget := 80, 2<<20, int64(64<<20)
	if *payloadHeapFull {
		messages, budget = 200, defaultPayloadMemory
	}
	if raceEnabled {
		// Under the race detector every byte costs some twenty times as
		// much CPU (gzip, base64, the blob transfer): the same flood at a
		// quarter of the scale.
		size, budget = size/4, budget/4
	}
	// The default GC settings, whatever the environment says: what a
	// container sized from the documented bound would see.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	bounded := peakPayloadHeap(t, messages, size, budget)
	bound := budget * 5 / 4
	fmt.Printf("peak heap above baseline: %d MiB with PayloadMemory %d MiB (bound %d MiB), %d messages of %d KiB\n",
		bounded>>20, budget>>20, bound>>20, messages, size>>10)
	require.Less(t, bounded, uint64(bound))
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
	cfg := quick()
	cfg.Codec = Raw()
	cfg.Payloads.Memory = budget
	if !*payloadHeapFull {
		// Room to download several at once within the small budget: each
		// download reserves its blob and the largest text it may inflate to.
		cfg.Payloads.Limits.MaxItemSize = 2 * size
	}
	return peakHeapHandling(t, q, n, cfg)
}

// peakHeapHandling handles n messages (or batch items) waiting on q with
// a listener configured by cfg, each held by its handler for a while so
// that a flood piles up to the budget, and returns the highest heap seen
// above the heap before the listener started. Every reservation must be
// given back at the end.
func peakHeapHandling(t *testing.T, q *Queue, n int, cfg *ListenerOptions) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse

	var handled atomic.Int64
	l, err := NewListener(q, func(_ context.Context, m *Message[string]) error {
		time.Sleep(1500 * time.Millisecond) // hold it: the flood piles up to the budget
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
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	stop := started(t, l)
	waitFor(t, "every message handled", func() bool {
		s := l.State()
		return handled.Load() == int64(n) && s.Succeeded+s.ItemsSucceeded >= int64(n) && s.InFlight == 0
	})
	require.NoError(t, stop())
	close(stopSampling)
	sampling.Wait()
	require.Zero(t, l.State().PayloadBytes, "every reservation given back")
	return peak.Load()
}

// A flood of batch items held by their handlers keeps the heap within what
// PayloadMemory documents, as a flood of claim-checked messages does:
// items of 2 MiB that compress to a few KiB each, so that their blobs are
// tiny and their texts are what takes the memory. Every item's text counts
// against the budget while its handler has it, however it came. (Eight
// batches of 60 such items took the heap to 863-964 MiB against 256 MiB:
// the items ran on handler slots with nothing reserved.) It runs in a
// process of its own, as TestPayloadMemoryBoundsTheHeap does.
func TestPayloadMemoryBoundsTheHeapOfBatchItems(t *testing.T) {
	long(t)
	if os.Getenv(heapChildEnv) != "" {
		measureBatchItemHeap(t)
		return
	}
	t.Parallel()
	connectionString(t)
	args := []string{"-test.run=^TestPayloadMemoryBoundsTheHeapOfBatchItems$", "-test.v", "-test.count=1"}
	if *payloadHeapFull {
		args = append(args, "-payload-heap-full")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), heapChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "peak heap") {
			t.Log(strings.TrimSpace(line))
		}
	}
	require.NoError(t, err, "the measuring process failed:\n%s", out)
}

func measureBatchItemHeap(t *testing.T) {
	batches, items, size, budget := 8, 12, 2<<20, int64(64<<20)
	if *payloadHeapFull {
		items, budget = 60, defaultPayloadMemory
	}
	if raceEnabled {
		size, budget = size/4, budget/4
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	ctx := context.Background()
	q := testQueue(t)
	p, err := NewPublisher[string](q, &PublisherOptions{Codec: Raw()})
	require.NoError(t, err)
	for b := range batches {
		texts := make([]string, items)
		for i := range texts {
			// Compressible: a short pattern repeated, each item its own.
			pat := fmt.Sprintf("batch %d item %d; ", b, i)
			texts[i] = strings.Repeat(pat, size/len(pat)+1)[:size]
		}
		_, err := p.SendBatch(ctx, texts, nil)
		require.NoError(t, err)
	}
	runtime.GC()
	cfg := quick()
	cfg.Codec = Raw()
	cfg.Payloads.Memory = budget
	if !*payloadHeapFull {
		// As at full scale, every batch fits the budget at once (each
		// holds room to read its largest item until its blob says how
		// large that is): the flood of items is what is measured.
		cfg.Payloads.Limits.MaxItemSize = 2 * size
	}
	peak := peakHeapHandling(t, q, batches*items, cfg)
	bound := budget * 5 / 4
	fmt.Printf("peak heap above baseline: %d MiB with PayloadMemory %d MiB (bound %d MiB), %d batches of %d items of %d KiB\n",
		peak>>20, budget>>20, bound>>20, batches, items, size>>10)
	require.Less(t, peak, uint64(bound))
}
