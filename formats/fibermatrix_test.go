package formats

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// handTensor is a 3x3x3 tensor whose mode-3 fiber matrix, sliced by mode 1,
// is worked out by hand in TestFiberMatrixByHand.
func handTensor() *COO {
	x, _ := NewCOO([]int{3, 3, 3}, 0)
	for _, e := range []struct {
		i, j, k uint32
		v       float32
	}{
		{2, 0, 1, 6}, {0, 1, 0, 1}, {0, 1, 2, 2}, {0, 2, 1, 3}, {2, 0, 0, 5}, {0, 1, 1, 7}, {2, 2, 2, 4},
	} {
		x.Append([]uint32{e.i, e.j, e.k}, e.v)
	}
	return x
}

func TestFiberMatrixByHand(t *testing.T) {
	f, err := NewFiberMatrix(handTensor(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Fibers (i,j) in order: (0,1): k=0,1,2 -> 1,7,2; (0,2): k=1 -> 3;
	// (2,0): k=0,1 -> 5,6; (2,2): k=2 -> 4. Slices by i: {0,1}, {2,3}.
	want := &FiberMatrix{
		Dims: []int{3, 3, 3}, Mode: 2, SliceMode: 0, FiberModes: []int{0, 1},
		FiberInds: [][]uint32{{0, 0, 2, 2}, {1, 2, 0, 2}},
		RowPtr:    []uint32{0, 3, 4, 6, 7},
		ColInd:    []uint32{0, 1, 2, 1, 0, 1, 2},
		Vals:      []float32{1, 7, 2, 3, 5, 6, 4},
		SlicePtr:  []uint32{0, 2, 4},
	}
	if !f.Equal(want) {
		t.Fatalf("got %+v\nwant %+v", f, want)
	}
	if got := f.Slices(); !slices.Equal(got, []Slice{{0, 0, 2, 4}, {2, 2, 4, 3}}) {
		t.Fatalf("slices %+v", got)
	}

	ell := NewELL(f)
	// Width 3; slot-major; padding repeats the row's last column, value 0.
	if ell.Width != 3 || !slices.Equal(ell.ColInd, []uint32{0, 1, 0, 2, 1, 1, 1, 2, 2, 1, 1, 2}) ||
		!slices.Equal(ell.Vals, []float32{1, 3, 5, 4, 7, 0, 6, 0, 2, 0, 0, 0}) {
		t.Fatalf("ELL %v %v", ell.ColInd, ell.Vals)
	}
	if got := ell.PaddingRatio(); got != 5.0/12 {
		t.Errorf("ELL padding %v, want 5/12", got)
	}
	// Row lengths 3,1,2,1: more than 2/3 of 4 rows are longer than 0, at
	// most 2/3 (2 rows) longer than 1, so K = 1.
	if k := HYBWidth(f); k != 1 {
		t.Errorf("HYB width %d, want 1", k)
	}
	hyb := NewHYB(f, -1)
	if !slices.Equal(hyb.COO.RowInd, []uint32{0, 0, 2}) || !slices.Equal(hyb.COO.Vals, []float32{7, 2, 6}) {
		t.Errorf("HYB COO part %v %v", hyb.COO.RowInd, hyb.COO.Vals)
	}
	if hyb.PaddingRatio() != 0 || hyb.Bytes() != 4*8+3*12 {
		t.Errorf("HYB padding %v bytes %d", hyb.PaddingRatio(), hyb.Bytes())
	}
	csr := NewCSR(f)
	if csr.Bytes() != 5*4+7*8 {
		t.Errorf("CSR bytes %d", csr.Bytes())
	}
}

// checkFiberFormats builds every fiber format of f and requires each to
// give f back, and f to give back the tensor sorted its way.
func checkFiberFormats(t *testing.T, x *COO, f *FiberMatrix) {
	t.Helper()
	sorted := x.Clone()
	sorted.SortBy(append(slices.Clone(f.FiberModes), f.Mode)...)
	if !f.Tensor().Equal(sorted) {
		t.Fatalf("mode %d slice %d: fiber matrix does not give the tensor back", f.Mode, f.SliceMode)
	}
	hybWidths := []int{-1, 0, 1, 3}
	for name, g := range map[string]*FiberMatrix{
		"coo": NewFiberCOO(f).FiberMatrix(), "csr": NewCSR(f).FiberMatrix(), "ell": NewELL(f).FiberMatrix(),
	} {
		if !g.Equal(f) {
			t.Fatalf("mode %d slice %d: %s round trip differs", f.Mode, f.SliceMode, name)
		}
	}
	for _, w := range hybWidths {
		if !NewHYB(f, w).FiberMatrix().Equal(f) {
			t.Fatalf("mode %d slice %d: HYB(%d) round trip differs", f.Mode, f.SliceMode, w)
		}
	}
	// Slices partition the rows; selecting all of them, in any order, and
	// putting them back in order gives f.
	s := f.Slices()
	total, next := 0, 0
	for _, sl := range s {
		if sl.RowStart != next || sl.RowEnd <= sl.RowStart {
			t.Fatalf("slices do not partition the rows: %+v", s)
		}
		next = sl.RowEnd
		total += sl.NNZ
	}
	if next != f.Rows() || total != f.NNZ() {
		t.Fatalf("slices cover %d rows and %d entries of %d and %d", next, total, f.Rows(), f.NNZ())
	}
	ids := rand.Perm(len(s))
	shuffled, err := f.SelectSlices(ids)
	if err != nil {
		t.Fatal(err)
	}
	inv := make([]int, len(ids))
	for p, i := range ids {
		inv[i] = p
	}
	back, err := shuffled.SelectSlices(inv)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(f) {
		t.Fatal("selecting shuffled slices and back differs")
	}
	if len(s) > 1 {
		half, _ := f.SelectSlices(ids[:len(ids)/2])
		if !NewHYB(half, -1).FiberMatrix().Equal(half) || !NewELL(half).FiberMatrix().Equal(half) {
			t.Fatal("formats of a slice selection do not round-trip")
		}
	}
}

func TestFiberFormatsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for order := 2; order <= 5; order++ {
		for trial := range 3 {
			dims := make([]int, order)
			for m := range dims {
				dims[m] = 1 + rng.IntN(12)
			}
			x := genCOO(rng, dims, 1+rng.IntN(300))
			if trial > 0 {
				x.Dedup()
			}
			for n := range order {
				for s := range order {
					if s == n {
						continue
					}
					f, err := NewFiberMatrix(x, n, s)
					if err != nil {
						t.Fatal(err)
					}
					checkFiberFormats(t, x, f)
				}
			}
		}
	}
}

// naiveFiberMatrix builds the fiber matrix by definition: a stable
// comparison sort of the nonzeros by the fiber modes (slicing mode first)
// and then the contracted mode, a row wherever a fiber index changes and a
// slice wherever the slicing index does.
func naiveFiberMatrix(x *COO, mode, sliceMode int) *FiberMatrix {
	f := &FiberMatrix{Dims: x.Dims, Mode: mode, SliceMode: sliceMode, FiberModes: []int{sliceMode}}
	for m := range x.Order() {
		if m != mode && m != sliceMode {
			f.FiberModes = append(f.FiberModes, m)
		}
	}
	s := sortReference(x, append(slices.Clone(f.FiberModes), mode))
	f.FiberInds = make([][]uint32, len(f.FiberModes))
	f.SlicePtr = []uint32{0}
	for k := range s.NNZ() {
		newRow := k == 0
		for _, m := range f.FiberModes {
			newRow = newRow || s.Inds[m][k] != s.Inds[m][k-1]
		}
		if newRow {
			if k > 0 && s.Inds[sliceMode][k] != s.Inds[sliceMode][k-1] {
				f.SlicePtr = append(f.SlicePtr, uint32(len(f.RowPtr)))
			}
			f.RowPtr = append(f.RowPtr, uint32(k))
			for j, m := range f.FiberModes {
				f.FiberInds[j] = append(f.FiberInds[j], s.Inds[m][k])
			}
		}
	}
	f.ColInd, f.Vals = s.Inds[mode], s.Vals
	f.RowPtr = append(f.RowPtr, uint32(x.NNZ()))
	if x.NNZ() > 0 {
		f.SlicePtr = append(f.SlicePtr, uint32(len(f.RowPtr)-1))
	}
	return f
}

// TestFiberMatrixAgainstNaive holds NewFiberMatrix to the definition on
// tensors large enough to be built in parallel chunks (rows and slices
// cut by the chunks' edges), unsorted and sorted by modes 0..N-1 (where
// the sort is skipped or shortened), with short and long fibers, and
// every mode's index fitting one 64-bit word or not.
func TestFiberMatrixAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	tests := []struct {
		name string
		dims []int
		nnz  int
	}{
		{"long fibers", []int{40, 30, 20}, 200_000},
		{"short fibers", []int{5000, 3000, 400}, 150_000},
		{"keys of a word", []int{1 << 20, 1 << 20, 1 << 16}, 100_000},
		{"keys past a word", []int{1 << 24, 1 << 24, 1 << 20}, 100_000},
		{"order 4", []int{30, 20, 10, 40}, 120_000},
		{"order 2", []int{700, 500}, 100_000},
	}
	for _, tc := range tests {
		x := genCOO(rng, tc.dims, tc.nnz)
		sorted := x.Clone()
		sorted.Sort()
		for _, in := range []struct {
			name string
			x    *COO
		}{{"unsorted", x}, {"sorted", sorted}} {
			for n := range x.Order() {
				for _, s := range []int{DefaultSliceMode(n), x.Order() - 1} {
					if s == n {
						continue
					}
					got, err := NewFiberMatrix(in.x, n, s)
					if err != nil {
						t.Fatal(err)
					}
					if want := naiveFiberMatrix(in.x, n, s); !got.Equal(want) {
						t.Errorf("%s, %s: mode %d sliced by %d differs from the definition (rows %d, want %d; slices %d, want %d)",
							tc.name, in.name, n+1, s+1, got.Rows(), want.Rows(), got.NumSlices(), want.NumSlices())
					}
				}
			}
		}
	}
}

func TestFiberMatrixErrors(t *testing.T) {
	x := handTensor()
	for _, c := range [][2]int{{0, 0}, {3, 0}, {0, -1}} {
		if _, err := NewFiberMatrix(x, c[0], c[1]); err == nil {
			t.Errorf("NewFiberMatrix(mode %d, slice %d) accepted", c[0], c[1])
		}
	}
	f, _ := NewFiberMatrix(x, 2, 0)
	for _, ids := range [][]int{{0, 0}, {2}, {-1}} {
		if _, err := f.SelectSlices(ids); err == nil {
			t.Errorf("SelectSlices(%v) accepted", ids)
		}
	}
}

func TestFiberFormatsReal(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(sharedData, "tensors", "*.tns"))
	if len(paths) == 0 {
		t.Skipf("no tensors in %s: skipping", sharedData)
	}
	for _, p := range paths {
		x, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for n := range x.Order() {
			s := (n + 1) % x.Order()
			f, err := NewFiberMatrix(x, n, s)
			if err != nil {
				t.Fatal(err)
			}
			checkFiberFormats(t, x, f)
		}
	}
}

// BenchmarkNewFiberMatrix measures building the fiber matrix of every mode,
// sliced by DefaultSliceMode, as a SpTTM plan does.
func BenchmarkNewFiberMatrix(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		for n := range bt.x.Order() {
			b.Run(fmt.Sprintf("%s/mode%d", bt.name, n+1), func(b *testing.B) {
				for b.Loop() {
					if _, err := NewFiberMatrix(bt.x, n, DefaultSliceMode(n)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkFiberFormats(b *testing.B) {
	inputs := map[string]*COO{"generated": genCOO(rand.New(rand.NewPCG(1, 1)), []int{100000, 20000, 5000}, 2_000_000)}
	if x, err := ReadFile(filepath.Join(sharedData, "tensors", "splatt_med4.tns")); err == nil {
		inputs["splatt_med4"] = x
	}
	for name, x := range inputs {
		f, _ := NewFiberMatrix(x, 0, 1)
		report := func(b *testing.B, bytes int64) {
			b.ReportMetric(float64(bytes+f.FiberBytes())/float64(x.NNZ()), "B/nnz")
		}
		b.Run(name+"/fibermatrix", func(b *testing.B) {
			for b.Loop() {
				NewFiberMatrix(x, 0, 1)
			}
		})
		b.Run(name+"/coo", func(b *testing.B) {
			for b.Loop() {
				report(b, NewFiberCOO(f).Bytes())
			}
		})
		b.Run(name+"/csr", func(b *testing.B) {
			for b.Loop() {
				report(b, NewCSR(f).Bytes())
			}
		})
		b.Run(name+"/ell", func(b *testing.B) {
			for b.Loop() {
				report(b, NewELL(f).Bytes())
			}
		})
		b.Run(name+"/hyb", func(b *testing.B) {
			for b.Loop() {
				report(b, NewHYB(f, -1).Bytes())
			}
		})
	}
}

func TestDescribeFootprints(t *testing.T) {
	// One long fiber among short ones: the mode-3 ELL is too padded to
	// build, and its size is computed instead.
	x, _ := NewCOO([]int{64, 64, 256}, 0)
	for k := range 200 {
		x.Append([]uint32{0, 0, uint32(k)}, 1)
	}
	for i := range 40 {
		x.Append([]uint32{uint32(i), 1, 0}, 2)
	}
	d, err := Describe(x)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := NewFiberMatrix(x, 2, 0)
	want := map[string]Footprint{
		"csr": {Bytes: NewCSR(f).Bytes() + f.FiberBytes()},
		"hyb": {Bytes: NewHYB(f, -1).Bytes() + f.FiberBytes()},
		// 41 rows, width 200: 8200 slots for 240 entries.
		"ell": {Bytes: 8*41*200 + f.FiberBytes(), PaddingRatio: 1 - 240.0/8200, Seconds: -1},
	}
	found := 0
	for _, fp := range d.Footprints {
		w, ok := want[fp.Format]
		if !ok || fp.Mode != 2 {
			continue
		}
		found++
		if fp.Bytes != w.Bytes || fp.PaddingRatio != w.PaddingRatio || (w.Seconds < 0) != (fp.Seconds < 0) {
			t.Errorf("%s: got %+v, want %+v", fp.Format, fp, w)
		}
	}
	if found != len(want) {
		t.Fatalf("found %d of %d footprints: %+v", found, len(want), d.Footprints)
	}
}
