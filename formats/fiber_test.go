package formats

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

func TestSubMatrixByHand(t *testing.T) {
	f, err := NewFiberMatrix(handTensor(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Rows 1 and 2 of the hand example: fiber (0,2) with k=1 -> 3 and
	// fiber (2,0) with k=0,1 -> 5,6; the range cuts both slices, so each
	// row is a slice of its own.
	g, err := f.SubMatrix(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := &FiberMatrix{
		Dims: []int{3, 3, 3}, Mode: 2, SliceMode: 0, FiberModes: []int{0, 1},
		FiberInds: [][]uint32{{0, 2}, {2, 0}},
		RowPtr:    []uint32{0, 1, 3},
		ColInd:    []uint32{1, 0, 1},
		Vals:      []float32{3, 5, 6},
		SlicePtr:  []uint32{0, 1, 2},
	}
	if !g.Equal(want) {
		t.Fatalf("got %+v\nwant %+v", g, want)
	}
	// Appending to the view must not write into f.
	g.Vals = append(g.Vals, 99)
	if f.Vals[6] != 4 {
		t.Fatal("appending to a SubMatrix overwrote its parent")
	}
	for _, r := range [][2]int{{-1, 2}, {3, 2}, {0, 5}} {
		if _, err := f.SubMatrix(r[0], r[1]); err == nil {
			t.Errorf("SubMatrix(%d, %d) accepted", r[0], r[1])
		}
	}
	if e, _ := f.SubMatrix(2, 2); e.Rows() != 0 || e.NNZ() != 0 || e.NumSlices() != 0 {
		t.Errorf("empty SubMatrix has %d rows, %d entries, %d slices", e.Rows(), e.NNZ(), e.NumSlices())
	}

	// Row lengths 3,1,2,1 and work entries+rows 4,2,3,2 (11 in all): two
	// parts cut where the work before reaches 5.5, before row 2 (work 6).
	if got := f.RowSplits(2); !slices.Equal(got, []int{0, 2, 4}) {
		t.Errorf("RowSplits(2) = %v", got)
	}
	if f.MaxRowLen() != 3 {
		t.Errorf("MaxRowLen %d", f.MaxRowLen())
	}
	// The HYB of width 1 keeps entries 7, 2 (row 0) and 6 (row 2) in COO.
	hyb := NewHYB(f, 1)
	if got := hyb.COO.EntrySplits(2); !slices.Equal(got, []int{0, 0, 3}) {
		// Entry 1 (of 3) is in row 0, which starts at entry 0.
		t.Errorf("EntrySplits(2) = %v", got)
	}
	// Work (1+1)·r + COO entries before r: 0, 4, 5, 8, 9 at r = 0..4;
	// the half, 4.5, is reached before row 2.
	rows, entries := hyb.RowSplits(2)
	if !slices.Equal(rows, []int{0, 2, 4}) || !slices.Equal(entries, []int{0, 2, 3}) {
		t.Errorf("HYB RowSplits(2) = %v, %v", rows, entries)
	}
}

// checkRowSplits requires splits to be parts+1 non-decreasing boundaries
// from 0 to n, each range within maxItem of its share of the work work(b)
// (the work before boundary b).
func checkRowSplits(t *testing.T, name string, splits []int, parts, n int, work func(b int) int64, maxItem int64) {
	t.Helper()
	if len(splits) != parts+1 || splits[0] != 0 || splits[parts] != n {
		t.Fatalf("%s: %d parts over %d: bad ends %v", name, parts, n, splits)
	}
	total := work(n)
	for p := range parts {
		if splits[p+1] < splits[p] {
			t.Fatalf("%s: boundaries decrease: %v", name, splits)
		}
		if w := work(splits[p+1]) - work(splits[p]); w > total/int64(parts)+maxItem+1 {
			t.Fatalf("%s: part %d of %d has work %d of %d (largest item %d): %v", name, p, parts, w, total, maxItem, splits)
		}
	}
}

// checkFiberExtras checks SubMatrix, the splits, NewFiberFormat,
// ConvertSlices and FiberFormatBytes on one fiber matrix.
func checkFiberExtras(t *testing.T, rng *rand.Rand, f *FiberMatrix, buildELL bool) {
	t.Helper()
	rows := f.Rows()
	// Two views cut at a random row hold the tensor between them.
	cut := rng.IntN(rows + 1)
	a, err := f.SubMatrix(0, cut)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.SubMatrix(cut, rows)
	if err != nil {
		t.Fatal(err)
	}
	whole, ta, tb := f.Tensor(), a.Tensor(), b.Tensor()
	for m := range whole.Inds {
		if !slices.Equal(whole.Inds[m], append(slices.Clone(ta.Inds[m]), tb.Inds[m]...)) {
			t.Fatalf("mode %d slice %d: SubMatrix views cut at %d lose mode %d indices", f.Mode, f.SliceMode, cut, m)
		}
	}
	if !slices.Equal(whole.Vals, append(slices.Clone(ta.Vals), tb.Vals...)) {
		t.Fatalf("mode %d slice %d: SubMatrix views cut at %d lose values", f.Mode, f.SliceMode, cut)
	}
	for _, v := range []*FiberMatrix{a, b} {
		for _, s := range v.Slices() {
			if s.RowEnd <= s.RowStart {
				t.Fatalf("empty slice in a view: %+v", v.Slices())
			}
			for r := s.RowStart; r < s.RowEnd; r++ {
				if v.FiberInds[0][r] != s.Index {
					t.Fatalf("row %d of slice %+v has slicing index %d", r, s, v.FiberInds[0][r])
				}
			}
		}
		if !NewHYB(v, -1).FiberMatrix().Equal(v) || !NewCSR(v).FiberMatrix().Equal(v) {
			t.Fatal("formats of a SubMatrix do not round-trip")
		}
	}
	// A view of whole consecutive slices equals their selection.
	if s := f.Slices(); len(s) > 0 {
		i := rng.IntN(len(s))
		j := i + rng.IntN(len(s)-i)
		v, _ := f.SubMatrix(s[i].RowStart, s[j].RowEnd)
		ids := make([]int, 0, j-i+1)
		for k := i; k <= j; k++ {
			ids = append(ids, k)
		}
		sel, _ := f.SelectSlices(ids)
		if !v.Equal(sel) {
			t.Fatalf("SubMatrix of slices %d to %d differs from SelectSlices", i, j)
		}
	}

	// Work splits.
	maxLen := int64(f.MaxRowLen())
	for _, parts := range []int{1, 2, 3, 7} {
		checkRowSplits(t, "RowSplits", f.RowSplits(parts), parts, rows,
			func(r int) int64 { return int64(f.RowPtr[r]) + int64(r) }, maxLen+1)
		coo := NewFiberCOO(f)
		es := coo.EntrySplits(parts)
		checkRowSplits(t, "EntrySplits", es, parts, f.NNZ(), func(e int) int64 { return int64(e) }, maxLen)
		for _, e := range es[:parts] {
			if e > 0 && e < f.NNZ() && coo.RowInd[e] == coo.RowInd[e-1] {
				t.Fatalf("EntrySplits %v cuts row %d", es, coo.RowInd[e])
			}
		}
		hyb := NewHYB(f, -1)
		hr, he := hyb.RowSplits(parts)
		before := func(r int) int64 { // COO entries before row r
			n := 0
			for _, x := range hyb.COO.RowInd {
				if int(x) < r {
					n++
				}
			}
			return int64(n)
		}
		slot := int64(hyb.ELL.Width) + 1
		checkRowSplits(t, "HYB.RowSplits", hr, parts, rows, func(r int) int64 { return slot*int64(r) + before(r) }, slot+maxLen)
		for p, r := range hr {
			if int64(he[p]) != before(r) {
				t.Fatalf("HYB.RowSplits: entries %v do not match rows %v", he, hr)
			}
		}
	}

	// Formats by name, their predicted sizes, and slice sets.
	for _, name := range append(slices.Clone(FiberFormatNames), "coo") {
		want, err := FiberFormatBytes(f, name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "ell" && !buildELL {
			if want != 8*int64(rows)*maxLen {
				t.Fatalf("ELL bytes %d, want %d", want, 8*int64(rows)*maxLen)
			}
			continue
		}
		x, err := NewFiberFormat(f, name)
		if err != nil {
			t.Fatal(err)
		}
		if x.Bytes() != want {
			t.Fatalf("%s: FiberFormatBytes %d, built %d", name, want, x.Bytes())
		}
		if !x.FiberMatrix().Equal(f) {
			t.Fatalf("%s by name does not round-trip", name)
		}
		ids := rng.Perm(f.NumSlices())
		ids = ids[:len(ids)/2]
		y, err := f.ConvertSlices(ids, name)
		if err != nil {
			t.Fatal(err)
		}
		sel, _ := f.SelectSlices(ids)
		if !y.FiberMatrix().Equal(sel) {
			t.Fatalf("%s: ConvertSlices differs from SelectSlices", name)
		}
	}
}

func TestFiberExtrasRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for order := 2; order <= 5; order++ {
		for trial := range 4 {
			dims := make([]int, order)
			for m := range dims {
				dims[m] = 1 + rng.IntN(10)
			}
			x := genCOO(rng, dims, rng.IntN(400))
			if trial%2 == 1 {
				if _, err := x.Dedup(); err != nil {
					t.Fatal(err)
				}
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
					checkFiberExtras(t, rng, f, true)
				}
			}
		}
	}
}

func TestFiberFormatNames(t *testing.T) {
	f, _ := NewFiberMatrix(handTensor(), 2, 0)
	for _, bad := range []string{"", "CSR", "csf", "ell "} {
		if _, err := NewFiberFormat(f, bad); err == nil {
			t.Errorf("NewFiberFormat(%q) accepted", bad)
		}
		if _, err := FiberFormatBytes(f, bad); err == nil {
			t.Errorf("FiberFormatBytes(%q) accepted", bad)
		}
		if _, err := f.ConvertSlices([]int{0}, bad); err == nil {
			t.Errorf("ConvertSlices(%q) accepted", bad)
		}
	}
	if _, err := f.ConvertSlices([]int{5}, "csr"); err == nil {
		t.Error("ConvertSlices of a slice out of range accepted")
	}
	want := map[string]string{"coo": "FiberCOO", "fiber-coo": "FiberCOO", "csr": "CSR", "ell": "ELL", "hyb": "HYB"}
	for name, w := range want {
		x, err := NewFiberFormat(f, name)
		if err != nil {
			t.Fatal(err)
		}
		if typeName(x) != w {
			t.Errorf("%s built a %s, want a %s", name, typeName(x), w)
		}
	}
}

func typeName(x any) string {
	switch x.(type) {
	case *FiberCOO:
		return "FiberCOO"
	case *CSR:
		return "CSR"
	case *ELL:
		return "ELL"
	case *HYB:
		return "HYB"
	}
	return "?"
}

func TestFiberExtrasReal(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(sharedData, "tensors", "*.tns"))
	if len(paths) == 0 {
		t.Skipf("no tensors in %s: skipping", sharedData)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range paths {
		x, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// One mode and slicing mode per tensor keeps the test short; the
		// formats themselves are checked on every mode in
		// TestFiberFormatsReal.
		n := rng.IntN(x.Order())
		f, err := NewFiberMatrix(x, n, DefaultSliceMode(n))
		if err != nil {
			t.Fatal(err)
		}
		// ELL of a skewed tensor can take gigabytes; its size is still
		// predicted.
		buildELL := int64(f.Rows())*int64(f.MaxRowLen()) <= 16*int64(f.NNZ())
		checkFiberExtras(t, rng, f, buildELL)
	}
}

// BenchmarkFiberShares times cutting a fiber matrix into one device's share:
// a row-range view, a selection of every other slice, and that selection
// converted to CSR and HYB; and predicting ELL's size against building it.
func BenchmarkFiberShares(b *testing.B) {
	inputs := map[string]*COO{"generated": genCOO(rand.New(rand.NewPCG(1, 1)), []int{100000, 20000, 5000}, 2_000_000)}
	if x, err := ReadFile(filepath.Join(sharedData, "tensors", "splatt_med4.tns")); err == nil {
		inputs["splatt_med4"] = x
	}
	for name, x := range inputs {
		f, err := NewFiberMatrix(x, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		var ids []int
		for i := 0; i < f.NumSlices(); i += 2 {
			ids = append(ids, i)
		}
		b.Run(name+"/submatrix-half", func(b *testing.B) {
			for b.Loop() {
				f.SubMatrix(0, f.Rows()/2)
			}
		})
		b.Run(name+"/select-half", func(b *testing.B) {
			for b.Loop() {
				f.SelectSlices(ids)
			}
		})
		for _, format := range []string{"csr", "hyb"} {
			b.Run(name+"/convert-half-"+format, func(b *testing.B) {
				for b.Loop() {
					f.ConvertSlices(ids, format)
				}
			})
		}
		b.Run(name+"/ell-bytes-predicted", func(b *testing.B) {
			for b.Loop() {
				FiberFormatBytes(f, "ell")
			}
		})
		b.Run(name+"/row-splits-64", func(b *testing.B) {
			for b.Loop() {
				f.RowSplits(64)
			}
		})
	}
}
