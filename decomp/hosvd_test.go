package decomp

import (
	"math"
	"math/rand/v2"
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
