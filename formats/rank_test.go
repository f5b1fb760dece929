package formats

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A dim far beyond the nonzeros is ranked by a radix sort, a small one in
// a bitmap, and both to the definition: the rank of an index is the
// number of distinct smaller ones.
func TestRankIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 1000, 5000} {
		for _, dim := range []int{1 << 30, 1 << 18, 5000, 3} {
			ind := make([]uint32, n)
			for k := range ind {
				ind[k] = uint32(rng.IntN(dim))
				if k > 0 && rng.IntN(3) == 0 {
					ind[k] = ind[rng.IntN(k)] // repeats
				}
			}
			r, bad := RankIndices(ind, dim)
			if bad != -1 {
				t.Fatalf("n %d, dim %d: bad %d", n, dim, bad)
			}
			sorted := slices.Clone(ind)
			slices.Sort(sorted)
			sorted = slices.Compact(sorted)
			if r.N != len(sorted) || len(r.Of) != n {
				t.Fatalf("n %d, dim %d: %d distinct, %d ranks; want %d, %d", n, dim, r.N, len(r.Of), len(sorted), n)
			}
			counts := make([]uint32, len(sorted))
			for k, i := range ind {
				want, _ := slices.BinarySearch(sorted, i)
				if r.Of[k] != uint32(want) {
					t.Fatalf("n %d, dim %d: nonzero %d (index %d) has rank %d, want %d", n, dim, k, i, r.Of[k], want)
				}
				counts[want]++
			}
			if !slices.Equal(r.Counts(), counts) {
				t.Fatalf("n %d, dim %d: counts %v, want %v", n, dim, r.Counts(), counts)
			}
		}
	}
	for _, dim := range []int{1 << 30, 100} {
		if _, bad := RankIndices([]uint32{5, uint32(dim), 1}, dim); bad != 1 {
			t.Errorf("index beyond dim %d: bad %d, want 1", dim, bad)
		}
	}
}
