// Package cpubusy tells whether this process has goroutines waiting for a
// core: whether its cores are all taken, so that running more goroutines
// side by side would add work but no speed.
//
// A listener asks before it gives the rest of a receive to goroutines of
// their own because a handler call was slow. A call is slow either because
// it waited on something, when more goroutines let the others run
// meanwhile, or because it waited for a core, when more goroutines only
// wait for one too, each a stack the garbage collector scans.
package cpubusy

import (
	"runtime"
	"runtime/metrics"
)

// runnable is the runtime's count of goroutines ready to run but waiting
// for a core.
const runnable = "/sched/goroutines/runnable:goroutines"

// Busy reports whether at least as many goroutines wait for a core as the
// process may use at once. The count is a moment's, and approximate: it is
// for choosing between two correct ways, not for a promise. It reports
// false where the runtime does not keep the count. It costs a few
// microseconds: ask when something is already slow, not per message.
func Busy() bool {
	s := [1]metrics.Sample{{Name: runnable}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return false
	}
	return s[0].Value.Uint64() >= uint64(runtime.GOMAXPROCS(0))
}
