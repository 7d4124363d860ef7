// Package allocs measures the heap a function allocates, for the tests that
// bound what reading untrusted input may cost: a parser fed a few bytes that
// claim gigabytes must refuse them before allocating, not after.
package allocs

import "runtime"

// Bytes returns how many heap bytes fn allocated, counted as the runtime's
// cumulative total so that memory fn freed again still counts. Allocations
// by other goroutines running meanwhile count too, so callers bound the
// result with some slack and do not run fn in parallel with other work.
func Bytes(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
