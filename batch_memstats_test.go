package azdispatch

import "runtime"

// runtimeMemStats reads the heap size for the memory-bound tests.
type runtimeMemStats struct{ m runtime.MemStats }

func (r *runtimeMemStats) heapInUse() uint64 {
	runtime.ReadMemStats(&r.m)
	return r.m.HeapInuse
}
