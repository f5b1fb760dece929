package decomp

import (
	"runtime"
)

// resolvedThreads turns a Threads setting into a goroutine count.
func resolvedThreads(t int) int {
	if t <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return t
}

// rangeParts returns how many ranges par.Range should use for n items of
// about cost flops each: small problems stay on one goroutine, where the
// start-up of several would cost more than it saves.
func rangeParts(n int, cost float64, threads int) int {
	const minWork = 1 << 15 // flops below which a goroutine is not worth it
	p := int(float64(n) * cost / minWork)
	if p < 1 {
		p = 1
	}
	if p > threads {
		p = threads
	}
	return p
}
