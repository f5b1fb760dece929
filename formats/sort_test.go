package formats

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortReference sorts a clone of t by modes with a stable comparison sort.
func sortReference(t *COO, modes []int) *COO {
	perm := make([]int, t.NNZ())
	for k := range perm {
		perm[k] = k
	}
	slices.SortStableFunc(perm, func(a, b int) int {
		for _, m := range modes {
			if c := cmp.Compare(t.Inds[m][a], t.Inds[m][b]); c != 0 {
				return c
			}
		}
		return 0
	})
	u := t.Clone()
	for k, p := range perm {
		for m := range u.Inds {
			u.Inds[m][k] = t.Inds[m][p]
		}
		u.Vals[k] = t.Vals[p]
	}
	return u
}

func TestSortByMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []struct {
		dims  []int
		nnz   int
		modes []int
	}{
		{[]int{5, 7}, 40, []int{1, 0}},
		{[]int{5, 7}, 40, []int{1}},
		{[]int{1, 1, 1}, 10, []int{0, 1, 2}},
		{[]int{30, 20, 10}, 5000, []int{2, 0, 1}},
		{[]int{30, 20, 10}, 5000, []int{1}},
		{[]int{1000, 3, 100000, 7}, 200000, []int{3, 2, 1, 0}},
		// 4 x 32 = 128 bits: two-word keys.
		{[]int{MaxDim, MaxDim, MaxDim, MaxDim}, 3000, []int{0, 1, 2, 3}},
		{[]int{1 << 30, 1 << 30, 1 << 30, 50}, 70000, []int{3, 1, 0, 2}},
		{[]int{9, MaxDim / 2, MaxDim / 2, 3}, 100, []int{1, 2, 0}},
	}
	// Every case twice: as the sizes choose, and with every sort of two
	// passes or more by its top digit first (radixSortMSD).
	cases := len(tests)
	tests = append(tests, tests...)
	defer func(keys int) { msdMinKeys = keys }(msdMinKeys)
	for i, tc := range tests {
		if i == cases {
			msdMinKeys = 2
		}
		t.Run(fmt.Sprint(tc.dims, tc.modes, msdMinKeys), func(t *testing.T) {
			x := genCOO(rng, tc.dims, tc.nnz)
			// Make duplicates on the sort key common so stability matters.
			for k := 0; k+1 < x.NNZ(); k += 3 {
				for _, m := range tc.modes {
					x.Inds[m][k+1] = x.Inds[m][k]
				}
			}
			want := sortReference(x, tc.modes)
			if err := x.SortBy(tc.modes...); err != nil {
				t.Fatal(err)
			}
			if !x.Equal(want) {
				t.Fatal("radix sort differs from the stable reference sort")
			}
			if !x.IsSortedBy(tc.modes...) {
				t.Fatal("IsSortedBy false after SortBy")
			}
		})
	}
}

// A tensor sorted by modes 0..N-1 is sorted by a stable sort of its
// leading modes only (sortedLead): the same result as a full sort, for
// every order of some or all modes, with duplicates and with ties.
func TestSortBySortedInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range [][]int{{30, 20, 10}, {7, 1, 9, 5}, {1 << 30, 50, 1 << 20}} {
		x := genCOO(rng, dims, 20000)
		for k := 0; k+1 < x.NNZ(); k += 4 { // duplicates and ties
			for m := range x.Inds {
				x.Inds[m][k+1] = x.Inds[m][k]
			}
		}
		x.Sort()
		orders := [][]int{{0}, {1}, {2}}
		for m := range dims {
			orders = append(orders, RootedOrder(len(dims), m))
		}
		for range 10 {
			p := rng.Perm(len(dims))
			orders = append(orders, p, p[:1+rng.IntN(len(dims))])
		}
		for _, modes := range orders {
			want := sortReference(x, modes)
			got := x.Clone()
			if err := got.SortBy(modes...); err != nil {
				t.Fatal(err)
			}
			if !got.Equal(want) {
				t.Fatalf("dims %v, sorted input, SortBy(%v) differs from the stable reference sort", dims, modes)
			}
		}
	}
}

func TestSortedLead(t *testing.T) {
	for _, tc := range []struct {
		modes []int
		order int
		want  int
	}{
		{[]int{0, 1, 2}, 3, 0},
		{[]int{0, 1}, 3, 0},
		{[]int{1, 0, 2}, 3, 1},
		{[]int{2, 0, 1}, 3, 1},
		{[]int{1, 2, 0}, 3, 2}, // after 1 comes 0, not 2; after 1 and 2, 0
		{[]int{2, 1, 0}, 3, 2},
		{[]int{2, 1, 0, 3}, 4, 2},
		{[]int{1}, 3, 1},
		{[]int{0, 2}, 3, 2}, // after 0 comes 1, not 2
		{[]int{3, 0, 1, 2}, 4, 1},
		{[]int{2, 3, 0, 1}, 4, 2},
		{nil, 3, 0},
	} {
		if got := sortedLead(tc.modes, tc.order); got != tc.want {
			t.Errorf("sortedLead(%v, %d) = %d, want %d", tc.modes, tc.order, got, tc.want)
		}
	}
}

func TestSortByRejectsBadModes(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(1, 1)), []int{3, 3, 3}, 5)
	for _, modes := range [][]int{{3}, {-1}, {0, 0}} {
		if err := x.SortBy(modes...); err == nil {
			t.Errorf("SortBy(%v) accepted", modes)
		}
	}
}

func TestDedup(t *testing.T) {
	x, _ := NewCOO([]int{3, 3, 3}, 0)
	for _, e := range []struct {
		i, j, k uint32
		v       float32
	}{{2, 0, 1, 1}, {0, 1, 2, 2}, {2, 0, 1, 3}, {0, 0, 0, 4}, {2, 0, 1, -0.5}, {0, 1, 2, 8}} {
		x.Append([]uint32{e.i, e.j, e.k}, e.v)
	}
	removed, err := x.Dedup()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewCOO([]int{3, 3, 3}, 0)
	want.Append([]uint32{0, 0, 0}, 4)
	want.Append([]uint32{0, 1, 2}, 10)
	want.Append([]uint32{2, 0, 1}, 3.5)
	if removed != 3 || !x.Equal(want) {
		t.Fatalf("Dedup removed %d, got %v %v, want 3 and %v %v", removed, x.Inds, x.Vals, want.Inds, want.Vals)
	}

	over, _ := NewCOO([]int{2, 2}, 0)
	over.Append([]uint32{1, 1}, 3e38)
	over.Append([]uint32{1, 1}, 3e38)
	before := over.Clone()
	if _, err := over.Dedup(); err == nil {
		t.Fatal("overflowing duplicate sum accepted")
	}
	if !over.Equal(before) {
		t.Fatal("failed Dedup changed the tensor")
	}
}

func TestDedupRandomConservesSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for order := 2; order <= 5; order++ {
		dims := make([]int, order)
		for m := range dims {
			dims[m] = 1 + rng.IntN(6)
		}
		x := genCOO(rng, dims, 400)
		sums := map[string]float64{}
		idx := make([]uint32, order)
		for k := range x.NNZ() {
			sums[fmt.Sprint(x.Coord(k, idx))] += float64(x.Vals[k])
		}
		if _, err := x.Dedup(); err != nil {
			t.Fatal(err)
		}
		if x.NNZ() != len(sums) {
			t.Fatalf("order %d: %d nonzeros after Dedup, want %d distinct", order, x.NNZ(), len(sums))
		}
		for k := range x.NNZ() {
			want := sums[fmt.Sprint(x.Coord(k, idx))]
			if d := float64(x.Vals[k]) - want; d > 1e-4 || d < -1e-4 {
				t.Fatalf("order %d: sum %v, want %v", order, x.Vals[k], want)
			}
		}
	}
}

// BenchmarkSort compares the parallel radix sort used by SortBy with a
// comparison sort of a permutation (slices.SortStableFunc) on the same key.
func BenchmarkSort(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := genCOO(rng, []int{100000, 20000, 5000}, 2_000_000)
	modes := []int{2, 0, 1}
	b.Run("radix", func(b *testing.B) {
		b.ReportMetric(float64(x.NNZ()), "nnz")
		for b.Loop() {
			y := x.Clone()
			y.SortBy(modes...)
		}
	})
	b.Run("comparison", func(b *testing.B) {
		for b.Loop() {
			sortReference(x, modes)
		}
	})
}

func TestSumDuplicates(t *testing.T) {
	build := func(entries [][4]uint32) *COO {
		x, _ := NewCOO([]int{3, 3, 3}, 0)
		for _, e := range entries {
			x.Append(e[:3], float32(e[3]))
		}
		return x
	}
	for _, c := range []struct {
		name    string
		entries [][4]uint32
		dups    int
	}{
		{"sorted, none", [][4]uint32{{0, 0, 0, 1}, {0, 1, 2, 2}, {2, 0, 1, 3}}, 0},
		{"unsorted, none", [][4]uint32{{2, 0, 1, 3}, {0, 0, 0, 1}, {0, 1, 2, 2}}, 0},
		{"sorted, adjacent", [][4]uint32{{0, 0, 0, 1}, {0, 0, 0, 2}, {2, 0, 1, 3}}, 1},
		{"unsorted, apart", [][4]uint32{{2, 0, 1, 3}, {0, 0, 0, 1}, {2, 0, 1, 4}, {2, 0, 1, 5}}, 2},
		{"empty", nil, 0},
	} {
		x := build(c.entries)
		before := x.Clone()
		if got := x.Duplicates(); got != c.dups || !x.Equal(before) {
			t.Errorf("%s: Duplicates = %d (tensor changed: %v), want %d", c.name, got, !x.Equal(before), c.dups)
		}
		removed, err := x.SumDuplicates()
		if err != nil || removed != c.dups {
			t.Errorf("%s: SumDuplicates = %d, %v, want %d", c.name, removed, err, c.dups)
		}
		if c.dups == 0 && !x.Equal(before) {
			t.Errorf("%s: SumDuplicates reordered a tensor without duplicates", c.name)
		}
		var sum, want float64
		for _, v := range x.Vals {
			sum += float64(v)
		}
		for _, v := range before.Vals {
			want += float64(v)
		}
		if sum != want || x.NNZ() != before.NNZ()-c.dups || x.Duplicates() != 0 {
			t.Errorf("%s: after summing: nnz %d sum %g, want nnz %d sum %g and no duplicates", c.name, x.NNZ(), sum, before.NNZ()-c.dups, want)
		}
	}
}

// BenchmarkDuplicates counts duplicate coordinates, as every reader does
// before summing them, in sorted and unsorted input.
func BenchmarkDuplicates(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		b.Run(bt.name, func(b *testing.B) {
			for b.Loop() {
				bt.x.Duplicates()
			}
		})
	}
}

// TestRadixSortMSD: the top-digit-first sort gives what a stable sort by
// the bits from to bits-1 gives, with and without a permutation carried,
// for keys spread over the buckets, keys in one bucket (its top digit
// constant: sorted by the bits below), and keys most of which fall in one
// bucket (sorted there with wide digits).
func TestRadixSortMSD(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 1 << 16
	for _, c := range []struct {
		name       string
		from, bits int
		key        func() uint64
	}{
		{"spread", 0, 40, func() uint64 { return rng.Uint64() >> 24 }},
		{"low bits kept", 13, 45, func() uint64 { return rng.Uint64() >> 19 }},
		{"one top digit", 0, 50, func() uint64 { return 5<<39 | rng.Uint64()>>30 }},
		{"a big bucket", 0, 36, func() uint64 {
			if rng.IntN(10) > 0 {
				return 7<<25 | rng.Uint64()>>47
			}
			return rng.Uint64() >> 28
		}},
		{"few distinct keys", 0, 30, func() uint64 { return uint64(rng.IntN(40)) << 20 }},
	} {
		for _, withPerm := range []bool{false, true} {
			keys := make([]uint64, n)
			for k := range keys {
				keys[k] = c.key()
			}
			type item struct {
				key uint64
				pos uint32
			}
			mask := uint64(1)<<c.bits - 1
			want := make([]item, n)
			for k, key := range keys {
				want[k] = item{key, uint32(k)}
			}
			slices.SortStableFunc(want, func(a, b item) int {
				return cmp.Compare(a.key&mask>>c.from, b.key&mask>>c.from)
			})
			var perm, pscratch []uint32
			if withPerm {
				perm, pscratch = identityPerm(n), make([]uint32, n)
			}
			radixSortMSD(keys, perm, make([]uint64, n), pscratch, c.from, c.bits)
			for k := range keys {
				if keys[k] != want[k].key {
					t.Fatalf("%s, permutation %v: position %d holds %x, want %x", c.name, withPerm, k, keys[k], want[k].key)
				}
				if withPerm && perm[k] != want[k].pos {
					t.Fatalf("%s: position %d came from %d, want %d", c.name, k, perm[k], want[k].pos)
				}
			}
		}
	}
}

// BenchmarkRadixSort sorts 7 M keys of 40 bits with their permutation,
// top digit first (radixSortMSD, what radixSortFrom does at that size)
// and a pass per digit over all of them.
func BenchmarkRadixSort(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 7 << 20
	src := make([]uint64, n)
	for k := range src {
		src[k] = rng.Uint64() >> 24
	}
	keys, scratch := make([]uint64, n), make([]uint64, n)
	perm, pscratch := make([]uint32, n), make([]uint32, n)
	for _, c := range []struct {
		name string
		min  int
	}{{"msd", msdMinKeys}, {"lsd", n + 1}} {
		b.Run(c.name, func(b *testing.B) {
			defer func(keys int) { msdMinKeys = keys }(msdMinKeys)
			msdMinKeys = c.min
			for b.Loop() {
				copy(keys, src)
				radixSortFrom(keys, perm, scratch, pscratch, 0, 40)
			}
		})
	}
}

// Duplicates and naturallySorted agree with a naive count and check on
// every order, with coordinates packed in a word (orders 2 to 4) or not
// (wider, or more modes), sorted or not, in chunks on several goroutines.
func TestScanOrderAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dims := range [][]int{
		{50, 40}, {1 << 22, 1 << 22, 1 << 22}, {30, 20, 10}, {9, 8, 7, 6}, {1 << 20, 1 << 20, 1 << 20, 1 << 20},
		{5, 6, 7, 8, 9}, {4, 4, 4, 4, 4, 4},
	} {
		x := genCOO(rng, dims, 150_000)
		y := x.Clone()
		all := make([]int, len(dims))
		for m := range all {
			all[m] = m
		}
		y.SortBy(all...)
		for _, z := range []*COO{x, y} {
			seen := map[string]bool{}
			dups, sorted := 0, true
			coord := make([]uint32, len(dims))
			for k := range z.NNZ() {
				key := fmt.Sprint(z.Coord(k, coord))
				if seen[key] {
					dups++
				}
				seen[key] = true
				if k > 0 && slices.Compare(z.Coord(k-1, nil), z.Coord(k, nil)) > 0 {
					sorted = false
				}
			}
			if got := z.Duplicates(); got != dups {
				t.Errorf("dims %v (sorted %v): Duplicates %d, naive %d", dims, sorted, got, dups)
			}
			if got := z.naturallySorted(); got != sorted {
				t.Errorf("dims %v: naturallySorted %v, naive %v", dims, got, sorted)
			}
		}
	}
}
