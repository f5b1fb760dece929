package radix

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		n, width int
	}{{0, 8}, {1, 64}, {5, 1}, {1000, 3}, {4096, 11}, {4096, 12}, {30000, 18}, {30000, 33}, {30000, 64}} {
		keys := make([]uint64, c.n)
		for i := range keys {
			keys[i] = rng.Uint64() >> (64 - c.width)
		}
		if c.n > 10 {
			keys[3] = keys[7] // a repeat
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		got := Sort(keys, make([]uint64, c.n), c.width)
		if !slices.Equal(got, want) {
			t.Errorf("n %d width %d: not sorted", c.n, c.width)
		}
	}
	same := []uint64{9, 9, 9, 9}
	if got := Sort(same, make([]uint64, 4), 4); !slices.Equal(got, []uint64{9, 9, 9, 9}) {
		t.Errorf("equal keys: %v", got)
	}
}

func BenchmarkSort(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, width := range []int{18, 64} {
		src := make([]uint64, 24000)
		for i := range src {
			src[i] = rng.Uint64() >> (64 - width)
		}
		keys, tmp := make([]uint64, len(src)), make([]uint64, len(src))
		b.Run(map[int]string{18: "18bit", 64: "64bit"}[width], func(b *testing.B) {
			for b.Loop() {
				copy(keys, src)
				Sort(keys, tmp, width)
			}
		})
	}
}
