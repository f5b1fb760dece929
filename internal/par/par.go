package par

import (
	"runtime"
	"slices"
	"sync"
)

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

// maxGrain is the fewest words MaxUint32 gives a goroutine.
const maxGrain = 1 << 16

// MaxUint32 returns the largest of a (0 if a is empty), reading chunks of
// it concurrently, at most one per GOMAXPROCS. It exists for the checks
// that every index is below its dim: four running maxima and no branch on
// the values keep the loop bound by memory, where a loop that stops at
// the first bad index, branching on each, ran at about a third of that.
func MaxUint32(a []uint32) uint32 { return MaxMasked(a, ^uint32(0)) }

// MaxMasked returns the largest of v&mask over v in a (0 if a is empty),
// as MaxUint32 does: with the exponent field of float32 bits as the mask,
// whether any value is an infinity or a NaN.
func MaxMasked(a []uint32, mask uint32) uint32 {
	parts := max(1, min(runtime.GOMAXPROCS(0), len(a)/maxGrain))
	if parts == 1 {
		return maxMasked(a, mask)
	}
	most := make([]uint32, parts)
	Range(len(a), parts, func(p, lo, hi int) { most[p] = maxMasked(a[lo:hi], mask) })
	return slices.Max(most)
}

func maxMasked(a []uint32, mask uint32) uint32 {
	var m0, m1, m2, m3 uint32
	k := 0
	for ; k+4 <= len(a); k += 4 {
		q := a[k : k+4 : k+4]
		m0, m1, m2, m3 = max(m0, q[0]&mask), max(m1, q[1]&mask), max(m2, q[2]&mask), max(m3, q[3]&mask)
	}
	for _, v := range a[k:] {
		m0 = max(m0, v&mask)
	}
	return max(m0, m1, m2, m3)
}
