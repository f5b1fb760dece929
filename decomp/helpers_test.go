package decomp

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// tensorDir holds the shared real tensors.
const tensorDir = "../../shared/data/tensors"

// realTensor reads a shared tensor, or skips the test when the data is
// absent.
func realTensor(t testing.TB, name string) *formats.COO {
	t.Helper()
	path := filepath.Join(tensorDir, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("real data absent (%v): skipping", err)
	}
	x, err := formats.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// planted is a CP model and the tensor it defines exactly.
type planted struct {
	x       *formats.COO
	factors []*kernels.Matrix
	lambda  []float64
}

// plantedCP builds a rank-R tensor whose factors have sparse non-negative
// columns: column r of mode m is nonzero on a random frac of the rows
// (values uniform in [0.5, 1.5)). The tensor is then zero outside the
// union of the components' support boxes, so keeping every nonzero cell
// gives a sparse tensor that is exactly rank R (up to float32 rounding).
func plantedCP(dims []int, R int, frac float64, seed uint64) planted {
	rng := rand.New(rand.NewPCG(seed, 7))
	N := len(dims)
	fs := make([]*kernels.Matrix, N)
	supports := make([][][]int, N) // [m][r] rows
	for m, I := range dims {
		fs[m] = kernels.NewMatrix(I, R)
		supports[m] = make([][]int, R)
		k := max(2, int(frac*float64(I)))
		for r := range R {
			rows := rng.Perm(I)[:k]
			slices.Sort(rows)
			supports[m][r] = rows
			for _, i := range rows {
				fs[m].Data[i*R+r] = 0.5 + rng.Float32()
			}
		}
	}
	// Sum every component over its support box into a map of cells.
	cells := map[[formats.MaxOrder]uint32]float64{}
	var walk func(r, m int, key [formats.MaxOrder]uint32, v float64)
	walk = func(r, m int, key [formats.MaxOrder]uint32, v float64) {
		if m == N {
			cells[key] += v
			return
		}
		for _, i := range supports[m][r] {
			key[m] = uint32(i)
			walk(r, m+1, key, v*float64(fs[m].Data[i*R+r]))
		}
	}
	for r := range R {
		walk(r, 0, [formats.MaxOrder]uint32{}, 1)
	}
	keys := make([][formats.MaxOrder]uint32, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [formats.MaxOrder]uint32) int {
		for m := range N {
			if a[m] != b[m] {
				return int(a[m]) - int(b[m])
			}
		}
		return 0
	})
	x, err := formats.NewCOO(dims, len(keys))
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		x.Append(k[:N], float32(cells[k]))
	}
	lambda := make([]float64, R)
	for r := range lambda {
		lambda[r] = 1
	}
	return planted{x: x, factors: fs, lambda: lambda}
}

// randomSparse returns a tensor with about density·cells nonzeros at
// random cells, values uniform in [0, 1) (duplicates summed).
func randomSparse(dims []int, density float64, seed uint64) *formats.COO {
	rng := rand.New(rand.NewPCG(seed, 11))
	cells := formats.Cells(dims)
	nnz := max(1, int(density*cells))
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		panic(err)
	}
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, rng.Float32()+0.01)
	}
	if _, err := x.Dedup(); err != nil {
		panic(err)
	}
	return x
}

// dense returns x as a dense float64 array in C order.
func dense(x *formats.COO) []float64 {
	size := 1
	for _, d := range x.Dims {
		size *= d
	}
	out := make([]float64, size)
	for k, v := range x.Vals {
		out[linear(x.Dims, func(m int) int { return int(x.Inds[m][k]) })] += float64(v)
	}
	return out
}

// linear returns the C-order offset of the coordinate idx(m).
func linear(dims []int, idx func(m int) int) int {
	off := 0
	for m, d := range dims {
		off = off*d + idx(m)
	}
	return off
}

// forEachCell calls f with every coordinate of dims in C order.
func forEachCell(dims []int, f func(idx []int)) {
	idx := make([]int, len(dims))
	for {
		f(idx)
		m := len(dims) - 1
		for m >= 0 {
			idx[m]++
			if idx[m] < dims[m] {
				break
			}
			idx[m] = 0
			m--
		}
		if m < 0 {
			return
		}
	}
}

// cpDense returns the dense tensor of [[λ; A]].
func cpDense(dims []int, fs []*kernels.Matrix, lambda []float64) []float64 {
	out := make([]float64, 0, int(formats.Cells(dims)))
	forEachCell(dims, func(idx []int) {
		var s float64
		for r, l := range lambda {
			p := l
			for m, a := range fs {
				p *= float64(a.At(idx[m], r))
			}
			s += p
		}
		out = append(out, s)
	})
	return out
}

// relDiff returns ‖a - b‖/‖b‖.
func relDiff(a, b []float64) float64 {
	var d, n float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
		n += b[i] * b[i]
	}
	return math.Sqrt(d / n)
}

// checkFinite fails the test on a NaN or Inf anywhere in a result.
func checkFinite(t *testing.T, fs []*kernels.Matrix, lambda []float64) {
	t.Helper()
	for m, f := range fs {
		if !allFinite(f) {
			t.Fatalf("factor of mode %d is not finite", m+1)
		}
	}
	for r, l := range lambda {
		if math.IsNaN(l) || math.IsInf(l, 0) {
			t.Fatalf("lambda[%d] = %v", r, l)
		}
	}
}
