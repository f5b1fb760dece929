package formats

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestModeStatsByHand(t *testing.T) {
	// A 3x2x2 tensor with 5 stored nonzeros, one of them a duplicate.
	x, _ := NewCOO([]int{3, 2, 2}, 0)
	for _, c := range [][3]uint32{{0, 0, 0}, {2, 0, 0}, {0, 1, 1}, {0, 1, 1}, {1, 1, 0}} {
		x.Append(c[:], 1)
	}
	tests := []struct {
		mode           int
		slices, fibers Summary
	}{
		// Mode 1: slices i=0 (3 nnz), i=1 (1), i=2 (1); fibers (j,k):
		// (0,0) has 2, (1,1) has 2, (1,0) has 1.
		{0, Summary{Count: 3, Min: 1, Max: 3, Mean: 5.0 / 3}, Summary{Count: 3, Min: 1, Max: 2, Mean: 5.0 / 3}},
		// Mode 2: slices j=0 (2), j=1 (3); fibers (i,k): (0,0) 1, (2,0) 1,
		// (0,1) 2, (1,0) 1.
		{1, Summary{Count: 2, Min: 2, Max: 3, Mean: 2.5}, Summary{Count: 4, Min: 1, Max: 2, Mean: 1.25}},
		// Mode 3: slices k=0 (3), k=1 (2); fibers (i,j): (0,0) 1, (2,0) 1,
		// (0,1) 2, (1,1) 1.
		{2, Summary{Count: 2, Min: 2, Max: 3, Mean: 2.5}, Summary{Count: 4, Min: 1, Max: 2, Mean: 1.25}},
	}
	for _, tc := range tests {
		st, err := x.ModeStats(tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if st.Distinct != 4 {
			t.Errorf("mode %d: Distinct = %d, want 4", tc.mode, st.Distinct)
		}
		check := func(what string, got, want Summary) {
			if got.Count != want.Count || got.Min != want.Min || got.Max != want.Max || abs(got.Mean-want.Mean) > 1e-12 {
				t.Errorf("mode %d %s: got %+v, want %+v", tc.mode, what, got, want)
			}
		}
		check("slices", st.Slices, tc.slices)
		check("fibers", st.Fibers, tc.fibers)
	}
	if _, err := x.ModeStats(3); err == nil {
		t.Error("ModeStats(3) accepted on an order-3 tensor")
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestModeStatsAgainstMaps counts fibers, distinct coordinates and
// duplicates (COO.Duplicates) with maps
// on tensors large enough to be sorted in parallel, unsorted and sorted by
// modes 0..N-1, with duplicates, indices fitting one word or not.
func TestModeStatsAgainstMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, dims := range [][]int{{60, 50, 40}, {1 << 24, 1 << 24, 1 << 20}, {20, 30, 10, 25}} {
		x := genCOO(rng, dims, 120_000)
		// Duplicates: repeat a tenth of the nonzeros.
		for k := range x.NNZ() / 10 {
			c := make([]uint32, len(dims))
			for m := range c {
				c[m] = x.Inds[m][k*7]
			}
			x.Append(c, 1)
		}
		sorted := x.Clone()
		sorted.Sort()
		for _, in := range []*COO{x, sorted} {
			for n := range len(dims) {
				fibers := map[string]int{}
				coords := map[string]bool{}
				for k := range in.NNZ() {
					key, full := "", ""
					for m := range len(dims) {
						s := fmt.Sprint(in.Inds[m][k], ",")
						full += s
						if m != n {
							key += s
						}
					}
					fibers[key]++
					coords[full] = true
				}
				most := 0
				for _, c := range fibers {
					most = max(most, c)
				}
				if n == 0 {
					if d := in.Duplicates(); d != in.NNZ()-len(coords) {
						t.Errorf("dims %v: %d duplicates, want %d", dims, d, in.NNZ()-len(coords))
					}
				}
				st, err := in.ModeStats(n)
				if err != nil {
					t.Fatal(err)
				}
				if st.Fibers.Count != len(fibers) || st.Fibers.Max != most || st.Distinct != len(coords) {
					t.Errorf("dims %v mode %d: %d fibers (longest %d), %d distinct; want %d (%d), %d",
						dims, n+1, st.Fibers.Count, st.Fibers.Max, st.Distinct, len(fibers), most, len(coords))
				}
			}
		}
	}
}

// TestModeStatsHugeDims: a mode of 2^32-1 indices with a few nonzeros
// (a hashed-id tensor, or a malformed file) is described from its
// nonzeros, not with a count per index (34 GB), and an index beyond
// its dim is an error, not a panic.
func TestModeStatsHugeDims(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("dims of 2^32-1 need a 64-bit int")
	}
	top := ^uint32(0) // a variable: the constant overflows a 32-bit int
	huge := int(top)
	x, _ := NewCOO([]int{huge, huge, 3}, 3)
	for _, c := range [][3]uint32{{0, 0, 0}, {^uint32(0) - 1, 1, 2}, {4, ^uint32(0) - 1, 0}} {
		x.Append(c[:], 1)
	}
	for n, want := range []Summary{{Count: 3, Min: 1, Max: 1, Mean: 1}, {Count: 3, Min: 1, Max: 1, Mean: 1}, {Count: 2, Min: 1, Max: 2, Mean: 1.5}} {
		st, err := x.ModeStats(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Slices; got.Count != want.Count || got.Min != want.Min || got.Max != want.Max || got.Mean != want.Mean {
			t.Errorf("mode %d slices: %+v, want %+v", n+1, got, want)
		}
	}
	x.Inds[2][1] = 3
	if _, err := x.ModeStats(2); err == nil || !strings.Contains(err.Error(), "nonzero 2: mode 3 index 4 out of range 1 to 3") {
		t.Errorf("index beyond the dim: error %v", err)
	}
}
