// Package cputime reads the CPU time this process has used: for benchmarks
// that report CPU per unit of work (on a shared machine wall time drifts
// with the neighbours, CPU time much less), and for a [Gauge] that tells a
// listener whether the process already fills the cores it may run on.
package cputime
