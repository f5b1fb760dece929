package decomp

import (
	"runtime"
	"sync"
)

// resolvedThreads turns a Threads setting into a goroutine count.
func resolvedThreads(t int) int {
	if t <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return t
}

// parallelRange cuts [0, n) into at most parts contiguous ranges of equal
// length and runs f(t, lo, hi) on range t in its own goroutine. The cut depends
// only on n and parts, so a reduction that combines per-range results in
// range order is deterministic for a given thread count.
func parallelRange(n, parts int, f func(t, lo, hi int)) {
	if parts > n {
		parts = n
	}
	if parts <= 1 {
		if n > 0 {
			f(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for t := range parts {
		lo, hi := n*t/parts, n*(t+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(t, lo, hi)
		}()
	}
	wg.Wait()
}

// rangeParts returns how many ranges parallelRange will use for n items of
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
