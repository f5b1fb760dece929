package decomp

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/sparsetune/sparsetune/formats"
)

// TestHOSVDUnusedIndices checks the HOSVD start of a mode that uses few of
// its indices: it runs on the used ones (exactly, where they are no more
// than the oversampled block), matches the leading left singular vectors
// of the dense unfolding, and fills columns past the used count with unit
// vectors on unused indices.
func TestHOSVDUnusedIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	dims := []int{400, 15, 12}
	used := []uint32{3, 50, 51, 97, 120, 200, 201, 260, 333, 399} // 10 of 400
	x, err := formats.NewCOO(dims, 600)
	if err != nil {
		t.Fatal(err)
	}
	for range 600 {
		x.Append([]uint32{used[rng.IntN(len(used))], uint32(rng.IntN(dims[1])), uint32(rng.IntN(dims[2]))}, float32(rng.NormFloat64()))
	}
	if _, err := x.Dedup(); err != nil {
		t.Fatal(err)
	}
	// The mode-1 unfolding, dense: 400 x (15·12).
	unf := mat.NewDense(dims[0], dims[1]*dims[2], nil)
	for k := range x.NNZ() {
		unf.Set(int(x.Inds[0][k]), int(x.Inds[1][k])*dims[2]+int(x.Inds[2][k]), float64(x.Vals[k]))
	}
	var svd mat.SVD
	if !svd.Factorize(unf, mat.SVDThin) {
		t.Fatal("svd failed")
	}
	var u mat.Dense
	svd.UTo(&u)

	for _, R := range []int{3, 10, 14} {
		f, err := hosvdFactor(x, 0, R, 7, 2)
		if err != nil {
			t.Fatalf("R=%d: %v", R, err)
		}
		a := mat.NewDense(f.Rows, f.Cols, nil)
		for i := range f.Rows {
			for j := range f.Cols {
				a.Set(i, j, float64(f.At(i, j)))
			}
		}
		var gram mat.Dense
		gram.Mul(a.T(), a)
		for i := range R {
			for j := range R {
				want := 0.0
				if i == j {
					want = 1
				}
				if d := math.Abs(gram.At(i, j) - want); d > 1e-5 {
					t.Fatalf("R=%d: columns not orthonormal: (AᵀA)[%d,%d] = %g", R, i, j, gram.At(i, j))
				}
			}
		}
		// The first min(R, 10) columns span the leading singular vectors:
		// ‖U_kᵀ A_k‖_F² = k for equal subspaces.
		k := min(R, len(used))
		var proj mat.Dense
		proj.Mul(u.Slice(0, dims[0], 0, k).T(), a.Slice(0, dims[0], 0, k))
		if f2 := mat.Norm(&proj, 2); math.Abs(f2*f2-float64(k)) > 1e-4 {
			t.Errorf("R=%d: subspace off the exact one (‖U_kᵀA_k‖_F² %g of %d)", R, f2*f2, k)
		}
		for j := len(used); j < R; j++ {
			var ones int
			for i := range dims[0] {
				v := f.At(i, j)
				if v == 1 {
					ones++
					for _, ui := range used {
						if int(ui) == i {
							t.Errorf("R=%d column %d: unit vector on used index %d", R, j, i)
						}
					}
				} else if v != 0 {
					t.Errorf("R=%d column %d: entry %g, want a unit vector", R, j, v)
				}
			}
			if ones != 1 {
				t.Errorf("R=%d column %d: %d ones", R, j, ones)
			}
		}
	}
}

// TestFiberProducts holds F·q and Fᵀ·z, as the HOSVD start computes
// them, to dense products, for every number of parts of Fᵀ·z up to more
// parts than F has columns with entries.
func TestFiberProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomSparse([]int{40, 30, 20}, 0.125, 5)
	fm, err := formats.NewFiberMatrix(x, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	const k = 5
	dense := mat.NewDense(fm.Rows(), fm.Cols(), nil)
	for r := range fm.Rows() {
		for e := fm.RowPtr[r]; e < fm.RowPtr[r+1]; e++ {
			dense.Set(r, int(fm.ColInd[e]), dense.At(r, int(fm.ColInd[e]))+float64(fm.Vals[e]))
		}
	}
	q := mat.NewDense(fm.Cols(), k, nil)
	z := mat.NewDense(fm.Rows(), k, nil)
	for i := range fm.Cols() {
		for j := range k {
			q.Set(i, j, rng.NormFloat64())
		}
	}
	fiberTimes(fm, q, z, 3)
	var want mat.Dense
	want.Mul(dense, q)
	if !mat.EqualApprox(z, &want, 1e-12) {
		t.Fatal("F·q differs from the dense product")
	}
	var wantT mat.Dense
	wantT.Mul(dense.T(), z)
	for _, parts := range []int{1, 2, 3, 7, 64} {
		w := mat.NewDense(fm.Cols(), k, nil)
		w.Apply(func(_, _ int, _ float64) float64 { return math.NaN() }, w) // every row must be written
		bounds := columnBounds(fm, parts)
		if bounds[0] != 0 || bounds[len(bounds)-1] != fm.Cols() || len(bounds)-1 > parts {
			t.Fatalf("%d parts: bounds %v", parts, bounds)
		}
		fiberTransTimes(fm, z, w, bounds)
		if !mat.EqualApprox(w, &wantT, 1e-12) {
			t.Fatalf("%d parts (bounds %v): Fᵀ·z differs from the dense product", parts, bounds)
		}
	}
}

// BenchmarkHOSVDFactor measures the HOSVD start of one mode of a tensor of
// 10^6 nonzeros at rank 8 (three power iterations on an 18-column block).
func BenchmarkHOSVDFactor(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	dims := []int{50000, 40000, 30}
	x, err := formats.NewCOO(dims, 1_000_000)
	if err != nil {
		b.Fatal(err)
	}
	idx := make([]uint32, 3)
	for range 1_000_000 {
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, float32(rng.NormFloat64()))
	}
	x.Sort()
	for b.Loop() {
		if _, err := hosvdFactor(x, 0, 8, 1, runtime.GOMAXPROCS(0)); err != nil {
			b.Fatal(err)
		}
	}
}
