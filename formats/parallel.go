package formats

import (
	"runtime"
	"sync"
)

// workers returns how many goroutines to use for n items when each should get
// at least grain of them.
func workers(n, grain int) int {
	w := runtime.GOMAXPROCS(0)
	if grain < 1 {
		grain = 1
	}
	if m := n / grain; m < w {
		w = m
	}
	return max(w, 1)
}

// parallelChunks splits [0,n) into w contiguous chunks and runs body on each
// concurrently; chunk c is [c*n/w, (c+1)*n/w).
func parallelChunks(n, w int, body func(c, lo, hi int)) {
	if w <= 1 {
		body(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for c := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(c, c*n/w, (c+1)*n/w)
		}()
	}
	wg.Wait()
}
