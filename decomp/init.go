package decomp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/kernels"
)

// newRNG returns the generator of a seed. The second PCG word is fixed
// so a seed names one stream for every method.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed_dec0_de_cafe)) }

// randomFactors returns one Dims[m] x ranks[m] matrix per mode with
// entries uniform in [0, 1), drawn mode by mode, row by row from one
// seeded stream: the same seed gives the same factors.
func randomFactors(dims, ranks []int, seed uint64) []*kernels.Matrix {
	rng := newRNG(seed)
	fs := make([]*kernels.Matrix, len(dims))
	for m := range dims {
		a := kernels.NewMatrix(dims[m], ranks[m])
		for k := range a.Data {
			a.Data[k] = rng.Float32()
		}
		fs[m] = a
	}
	return fs
}

// orthonormalise replaces the columns of a (I x R, R <= I) by an
// orthonormal basis of their span (see orthonormalColumns).
func orthonormalise(a *kernels.Matrix) {
	cols := make([][]float64, a.Cols)
	for j := range cols {
		cols[j] = make([]float64, a.Rows)
		for i := range a.Rows {
			cols[j][i] = float64(a.Data[i*a.Cols+j])
		}
	}
	orthonormalColumns(cols)
	for j, c := range cols {
		for i, v := range c {
			a.Data[i*a.Cols+j] = float32(v)
		}
	}
}

// orthonormalColumns makes the R vectors cols (each of length I >= R)
// orthonormal, spanning what they spanned where they were independent:
// modified Gram-Schmidt, run twice per column ("twice is enough",
// Giraud et al. 2005) so orthogonality holds to rounding even for nearly
// dependent columns. It is a thin QR that never forms an I x I matrix,
// which gonum's QR.QTo would. A column left (near) zero by the projection
// is dependent on the earlier ones; it is replaced by the first unit
// vector e_i that is not, so the result always has R orthonormal columns.
func orthonormalColumns(cols [][]float64) {
	// project removes from c its components along cols[:upto], twice.
	project := func(c []float64, upto int) {
		for range 2 {
			for _, q := range cols[:upto] {
				floats.AddScaled(c, -floats.Dot(q, c), q)
			}
		}
	}
	for j, c := range cols {
		before := norm2(c)
		project(c, j)
		after := norm2(c)
		// A column that lost all but 1e-10 of its norm was (numerically)
		// in the span of the earlier ones: try unit vectors instead. One of
		// e_0 … e_j is always independent of j orthonormal vectors.
		for e := 0; (after == 0 || after <= 1e-10*before) && e < len(c); e++ {
			clear(c)
			c[e] = 1
			project(c, j)
			before, after = 1, norm2(c)
		}
		if after > 0 {
			floats.Scale(1/after, c)
		}
	}
}

// norm2 returns the 2-norm of v.
func norm2(v []float64) float64 {
	return math.Sqrt(floats.Dot(v, v))
}

// HOSVD initialisation.
//
// The leading left singular vectors of the unfolding X_(n) are the leading
// eigenvectors of X_(n)X_(n)ᵀ = FᵀF, where F is the mode-n fiber matrix
// (one row per non-empty mode-n fiber, one column per mode-n index): the
// unfolding's columns that are not zero are exactly F's rows. So they are
// found without forming anything of the tensor's size, by randomised
// subspace iteration (Halko, Martinsson and Tropp 2011) with the operator
// Q ↦ Fᵀ(FQ): start from a seeded Gaussian I_n x k block, k = R + 10
// (capped at I_n), apply the operator hosvdPowerIters times with a QR after
// each, and take the Ritz vectors of the last block (eigenvectors of
// (FQ)ᵀ(FQ), k x k). When k reaches I_n the start block is the identity and
// the answer is exact. F is built by formats.NewFiberMatrix; the products
// run in float64 over its CSR arrays.

const (
	hosvdOversample = 10
	hosvdPowerIters = 3
)

// hosvdFactor returns the R leading left singular vectors of x's mode-n
// unfolding as an I_n x R matrix.
//
// An index that no nonzero uses is a zero column of F, so its row of every
// singular vector with a non-zero singular value is zero: when a tenth or
// more of the mode's indices are unused, the iteration runs on the mode
// compacted (formats.COO.CompactMode), in memory and time of the used
// indices, and the rows are put back in place. Columns past the used
// indices' count are unit vectors on unused indices, orthogonal to the
// rest, as any basis of the null space would be.
func hosvdFactor(x *formats.COO, n, R int, seed uint64, threads int) (*kernels.Matrix, error) {
	I := x.Dims[n]
	if R > I {
		return nil, fmt.Errorf("hosvd init: rank %d exceeds dim %d of mode %d (use random init)", R, I, n+1)
	}
	c, orig, err := x.CompactMode(n)
	if err != nil {
		return nil, fmt.Errorf("hosvd init: %w", err)
	}
	if len(orig) < I-I/10 {
		f, err := hosvdFactor(c, n, min(R, c.Dims[n]), seed, threads)
		if err != nil {
			return nil, err
		}
		out := kernels.NewMatrix(I, R)
		for j, i := range orig {
			copy(out.Row(int(i)), f.Row(j))
		}
		// The null space's columns: unit vectors on the first unused
		// indices.
		col, next := f.Cols, 0
		for i := 0; i < I && col < R; i++ {
			if next < len(orig) && int(orig[next]) == i {
				next++
				continue
			}
			out.Data[i*R+col] = 1
			col++
		}
		return out, nil
	}
	k := min(R+hosvdOversample, I)
	// q and w, and orthoDense's copy of q, in float64.
	if err := kernels.CheckDenseFits(x, fmt.Sprintf("hosvd init of mode %d", n+1), [2]int{I, 6 * k}); err != nil {
		return nil, err
	}
	fm, err := formats.NewFiberMatrix(x, n, formats.DefaultSliceMode(n))
	if err != nil {
		return nil, fmt.Errorf("hosvd init: fiber matrix of mode %d: %w", n+1, err)
	}
	q := mat.NewDense(I, k, nil)
	iters := hosvdPowerIters
	if k == I {
		for i := range I {
			q.Set(i, i, 1)
		}
		iters = 0
	} else {
		rng := newRNG(seed ^ uint64(n+1)*0x9e3779b97f4a7c15)
		for i := range I {
			for j := range k {
				q.Set(i, j, rng.NormFloat64())
			}
		}
		orthoDense(q)
	}
	z := mat.NewDense(max(fm.Rows(), 1), k, nil)
	w := mat.NewDense(I, k, nil)
	// Each part of Fᵀ·z scans all of F: worth a part per thread only
	// where the work per entry (k products) dwarfs the scan.
	bounds := columnBounds(fm, rangeParts(fm.NNZ(), float64(2*k), threads))
	for range iters {
		fiberTimes(fm, q, z, threads)
		fiberTransTimes(fm, z, w, bounds)
		q.Copy(w)
		orthoDense(q)
	}
	// Rayleigh-Ritz: QᵀFᵀFQ = QᵀW with W = Fᵀ(FQ), I x k, where ZᵀZ with
	// Z = FQ would sum over F's rows, one per fiber and far more than I;
	// its eigenvectors V rotate Q onto the approximate singular vectors,
	// largest first. QᵀW is symmetric but for rounding: its two halves are
	// averaged.
	fiberTimes(fm, q, z, threads)
	fiberTransTimes(fm, z, w, bounds)
	var qw mat.Dense
	qw.Mul(q.T(), w)
	b := mat.NewSymDense(k, nil)
	for i := range k {
		for j := i; j < k; j++ {
			b.SetSym(i, j, (qw.At(i, j)+qw.At(j, i))/2)
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(b, true) {
		return nil, fmt.Errorf("hosvd init: eigen decomposition of mode %d failed", n+1)
	}
	vals := eig.Values(nil)
	var v mat.Dense
	eig.VectorsTo(&v)
	order := make([]int, k)
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return vals[order[a]] > vals[order[b]] })
	out := kernels.NewMatrix(I, R)
	row := make([]float64, k)
	for i := range I {
		mat.Row(row, i, q)
		dst := out.Row(i)
		for c := range R {
			col := order[c]
			var s float64
			for j, x := range row {
				s += x * v.At(j, col)
			}
			dst[c] = float32(s)
		}
	}
	fixSigns(out)
	return out, nil
}

// orthoDense replaces the columns of q by an orthonormal basis of their
// span (see orthonormalColumns).
func orthoDense(q *mat.Dense) {
	r, c := q.Dims()
	cols := make([][]float64, c)
	for j := range cols {
		cols[j] = mat.Col(nil, j, q)
	}
	orthonormalColumns(cols)
	for j, col := range cols {
		for i := range r {
			q.Set(i, j, col[i])
		}
	}
}

// fiberTimes sets z = F·q (rows of F by rows, in parallel: each row of z
// belongs to one goroutine).
func fiberTimes(fm *formats.FiberMatrix, q, z *mat.Dense, threads int) {
	_, k := q.Dims()
	rows := fm.Rows()
	par.Range(rows, rangeParts(rows, float64(2*k*max(fm.NNZ()/max(rows, 1), 1)), threads), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			dst := z.RawRowView(r)
			clear(dst)
			for e := fm.RowPtr[r]; e < fm.RowPtr[r+1]; e++ {
				floats.AddScaled(dst, float64(fm.Vals[e]), q.RawRowView(int(fm.ColInd[e])))
			}
		}
	})
}

// fiberTransTimes sets w = Fᵀ·z. Part p of the work owns the rows of w
// (F's columns) from bounds[p] to bounds[p+1]-1 and scans all of F for
// the entries in them: every row of w is summed in the order of a serial
// scatter, z is read in order, and w's rows are read and written at
// random within a part, as the scatter would, where a transposed F
// would read z's far larger rows at random.
func fiberTransTimes(fm *formats.FiberMatrix, z, w *mat.Dense, bounds []int) {
	par.Range(len(bounds)-1, len(bounds)-1, func(p, _, _ int) {
		lo, hi := uint32(bounds[p]), uint32(bounds[p+1])
		for i := lo; i < hi; i++ {
			clear(w.RawRowView(int(i)))
		}
		for r := range fm.Rows() {
			var src []float64
			for e := fm.RowPtr[r]; e < fm.RowPtr[r+1]; e++ {
				col := fm.ColInd[e]
				if col < lo || col >= hi {
					continue
				}
				if src == nil {
					src = z.RawRowView(r)
				}
				floats.AddScaled(w.RawRowView(int(col)), float64(fm.Vals[e]), src)
			}
		}
	})
}

// columnBounds cuts F's columns into at most parts ranges holding about
// equal numbers of entries, for fiberTransTimes.
func columnBounds(fm *formats.FiberMatrix, parts int) []int {
	perCol := make([]int, fm.Cols())
	for _, c := range fm.ColInd {
		perCol[c]++
	}
	bounds := []int{0}
	seen := 0
	for c, n := range perCol {
		seen += n
		if len(bounds) < parts && seen*parts >= len(bounds)*fm.NNZ() && c+1 < fm.Cols() {
			bounds = append(bounds, c+1)
		}
	}
	return append(bounds, fm.Cols())
}

// fixSigns flips each column of a so that its entry of largest magnitude
// is positive: singular vectors are defined up to sign, and a fixed choice
// keeps results reproducible across linear algebra paths.
func fixSigns(a *kernels.Matrix) {
	for j := range a.Cols {
		var big float32
		for i := range a.Rows {
			if v := a.At(i, j); math.Abs(float64(v)) > math.Abs(float64(big)) {
				big = v
			}
		}
		if big < 0 {
			for i := range a.Rows {
				a.Data[i*a.Cols+j] = -a.Data[i*a.Cols+j]
			}
		}
	}
}

// RandomFactors returns the starting factors CPALS draws for a tensor of
// the given dims at the given rank and seed (Options.Init = InitRandom):
// for a caller that must hold them itself, such as a distributed run that
// relabels the indices and passes the factors, rows relabelled alike, as
// Options.InitFactors.
func RandomFactors(dims []int, rank int, seed uint64) []*kernels.Matrix {
	ranks := make([]int, len(dims))
	for m := range ranks {
		ranks[m] = rank
	}
	return randomFactors(dims, ranks, seed)
}
