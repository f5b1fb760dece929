package par

import "sync"

// Range cuts [0, n) into at most parts contiguous ranges of equal length
// and runs f(part, lo, hi) on range part in its own goroutine, returning
// when all are done. Range part is [n·part/parts, n·(part+1)/parts): the
// cut depends only on n and parts, so a reduction that combines per-range
// results in range order is deterministic for a given part count. With
// one part (or n ≤ 1) f runs on the caller's goroutine; with n = 0 it
// does not run.
func Range(n, parts int, f func(part, lo, hi int)) {
	parts = min(parts, n)
	if parts <= 1 {
		if n > 0 {
			f(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(p, n*p/parts, n*(p+1)/parts)
		}()
	}
	wg.Wait()
}
