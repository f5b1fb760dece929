package par

import (
	"sync/atomic"
	"testing"
)

func TestRange(t *testing.T) {
	for _, c := range []struct{ n, parts, calls int }{
		{0, 4, 0}, {1, 4, 1}, {3, 8, 3}, {10, 1, 1}, {10, 0, 1}, {1000, 7, 7},
	} {
		seen := make([]int32, c.n)
		var calls atomic.Int32
		prevHi := make([]int, max(c.parts, 1))
		Range(c.n, c.parts, func(part, lo, hi int) {
			calls.Add(1)
			if lo > hi {
				t.Errorf("n=%d parts=%d: part %d is [%d,%d)", c.n, c.parts, part, lo, hi)
			}
			prevHi[part] = hi
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
		})
		if int(calls.Load()) != c.calls {
			t.Errorf("n=%d parts=%d: %d calls, want %d", c.n, c.parts, calls.Load(), c.calls)
		}
		for i, s := range seen {
			if s != 1 {
				t.Errorf("n=%d parts=%d: index %d covered %d times", c.n, c.parts, i, s)
			}
		}
	}
}
