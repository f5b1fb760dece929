package decomp

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/kernels"
)

// The dense steps work in float64 on R x R matrices (R the rank) and
// stream the float32 factor matrices row by row; none forms anything of
// the tensor's size.

// maxCond is the condition number above which a Cholesky solve is not
// trusted and the truncated pseudo-inverse is used instead. The limit comes
// from the float32 data, not from float64's range: the MTTKRP and the
// factors carry relative errors of about 1e-7, which a solve amplifies by
// up to the condition number. At 1e8 (an over-factored rank-1 tensor gets
// there in two iterations) the solution is two huge components of opposite
// sign whose difference is float32 noise, and the fit jumps from 1 to 0.5
// and back. Capping at 1e6 bounds the amplified error to about 10% of a
// step that the next iteration corrects, and the pseudo-inverse drops the
// directions below σ_max/maxCond, which carry only that noise.
const maxCond = 1e6

// gram returns AᵀA (R x R, row-major, float64). Rows are cut into ranges
// summed separately and added in range order, so the result depends only
// on the thread count. Like mulSmall it takes four rows per pass over the
// accumulator (only its upper triangle, mirrored at the end).
func gram(a *kernels.Matrix, threads int) []float64 { return gramScaled(a, nil, threads) }

// gramScaled is gram, but when inv is not nil it first multiplies column j
// of a by inv[j], in place, in the same pass.
func gramScaled(a *kernels.Matrix, inv []float32, threads int) []float64 {
	R := a.Cols
	parts := rangeParts(a.Rows, float64(R*R), threads)
	partial := make([][]float64, parts)
	par.Range(a.Rows, parts, func(t, lo, hi int) {
		g := make([]float64, R*R)
		var rows [4][]float64
		for q := range rows {
			rows[q] = make([]float64, R)
		}
		i := lo
		for ; i+4 <= hi; i += 4 {
			for q := range rows {
				src := a.Row(i + q)
				if inv != nil {
					for j := range src {
						src[j] *= inv[j]
					}
				}
				for j, v := range src {
					rows[q][j] = float64(v)
				}
			}
			r0, r1, r2, r3 := rows[0], rows[1], rows[2], rows[3]
			for j := range R {
				v0, v1, v2, v3 := r0[j], r1[j], r2[j], r3[j]
				gj := g[j*R+j : j*R+R]
				a0, a1, a2, a3 := r0[j:], r1[j:], r2[j:], r3[j:]
				a0, a1, a2, a3 = a0[:len(gj)], a1[:len(gj)], a2[:len(gj)], a3[:len(gj)]
				for k := range gj {
					gj[k] += v0*a0[k] + v1*a1[k] + v2*a2[k] + v3*a3[k]
				}
			}
		}
		for ; i < hi; i++ {
			row := rows[0]
			src := a.Row(i)
			if inv != nil {
				for j := range src {
					src[j] *= inv[j]
				}
			}
			for j, v := range src {
				row[j] = float64(v)
			}
			for j, vj := range row {
				gj := g[j*R+j : j*R+R]
				rj := row[j:]
				rj = rj[:len(gj)]
				for k := range gj {
					gj[k] += vj * rj[k]
				}
			}
		}
		partial[t] = g
	})
	g := make([]float64, R*R)
	for _, p := range partial {
		if p == nil {
			continue
		}
		for k, v := range p {
			g[k] += v
		}
	}
	for j := range R {
		for k := j + 1; k < R; k++ {
			g[k*R+j] = g[j*R+k]
		}
	}
	return g
}

// hadamardExcept returns the elementwise product of grams[m] over m ≠ skip
// (skip < 0 multiplies all).
func hadamardExcept(grams [][]float64, skip int) []float64 {
	R2 := len(grams[0])
	v := make([]float64, R2)
	for k := range v {
		v[k] = 1
	}
	for m, g := range grams {
		if m == skip {
			continue
		}
		for k := range v {
			v[k] *= g[k]
		}
	}
	return v
}

// symInverse returns the inverse of the symmetric positive semidefinite
// R x R matrix v, or its Moore-Penrose pseudo-inverse when v is singular
// or its condition number exceeds maxCond (pinv reports which). The
// pseudo-inverse drops singular values below σ_max/maxCond, so a
// rank-deficient system (two equal columns, a zero column, rank above a
// dimension) gives the least-norm solution in the well-determined
// directions, never Inf or NaN.
func symInverse(v []float64, R int) (inv []float64, pinv bool) {
	sym := mat.NewSymDense(R, nil)
	for i := range R {
		for j := i; j < R; j++ {
			sym.SetSym(i, j, v[i*R+j])
		}
	}
	var ch mat.Cholesky
	if ch.Factorize(sym) && ch.Cond() <= maxCond {
		var s mat.SymDense
		if err := ch.InverseTo(&s); err == nil {
			inv = make([]float64, R*R)
			ok := true
			for i := range R {
				for j := range R {
					x := s.At(i, j)
					if math.IsNaN(x) || math.IsInf(x, 0) {
						ok = false
					}
					inv[i*R+j] = x
				}
			}
			if ok {
				return inv, false
			}
		}
	}
	return pseudoInverse(v, R), true
}

// pseudoInverse returns the pseudo-inverse of the symmetric R x R matrix v
// from its SVD, truncated at σ_max/maxCond (see maxCond).
func pseudoInverse(v []float64, R int) []float64 {
	inv := make([]float64, R*R)
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return inv // nothing sensible to invert: the zero matrix keeps factors finite
		}
	}
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(R, R, append([]float64(nil), v...)), mat.SVDThin) {
		return inv
	}
	s := svd.Values(nil)
	if len(s) == 0 || s[0] == 0 {
		return inv
	}
	var u, w mat.Dense
	svd.UTo(&u)
	svd.VTo(&w)
	tol := s[0] / maxCond
	for k, sk := range s {
		if sk <= tol {
			continue
		}
		for i := range R {
			wi := w.At(i, k) / sk
			for j := range R {
				inv[i*R+j] += wi * u.At(j, k)
			}
		}
	}
	return inv
}

// mulSmall sets a = m·s for an I x K float32 matrix m and a K x C
// float64 matrix s (C = a.Cols; K = C = R for CP-ALS's solve), row by row
// in parallel, accumulating in float64. a and m may be the same when
// K = C. On a tensor whose dims are large against its nonzeros this
// product costs more than the MTTKRP (I·R² against nnz·R per mode), so the
// inner loop takes four rows of s per pass over the accumulator: a quarter
// of the accumulator loads and stores.
//
// It also returns, per column of a (as stored, in float32), the sum of
// squares and the largest magnitude, which CP-ALS's normalisation needs:
// computing them here saves a pass over a. A NaN or Inf in a shows as a
// NaN or Inf sum.
func mulSmall(a, m *kernels.Matrix, s []float64, threads int) (sumSq, maxAbs []float64) {
	K, C := m.Cols, a.Cols
	parts := rangeParts(m.Rows, float64(K*C), threads)
	partSq := make([][]float64, parts)
	partMax := make([][]float64, parts)
	par.Range(m.Rows, parts, func(t, lo, hi int) {
		acc := make([]float64, C)
		sq := make([]float64, C)
		mx := make([]float64, C)
		for i := lo; i < hi; i++ {
			src := m.Row(i)
			clear(acc)
			j := 0
			for ; j+4 <= K; j += 4 {
				v0, v1, v2, v3 := float64(src[j]), float64(src[j+1]), float64(src[j+2]), float64(src[j+3])
				s0 := s[j*C : j*C+C]
				s1 := s[(j+1)*C : (j+1)*C+C]
				s2 := s[(j+2)*C : (j+2)*C+C]
				s3 := s[(j+3)*C : (j+3)*C+C]
				s0, s1, s2, s3 = s0[:len(acc)], s1[:len(acc)], s2[:len(acc)], s3[:len(acc)]
				for k := range acc {
					acc[k] += v0*s0[k] + v1*s1[k] + v2*s2[k] + v3*s3[k]
				}
			}
			for ; j < K; j++ {
				v := float64(src[j])
				sj := s[j*C : j*C+C]
				sj = sj[:len(acc)]
				for k := range acc {
					acc[k] += v * sj[k]
				}
			}
			dst := a.Row(i)
			dst = dst[:len(acc)]
			sq, mx := sq[:len(acc)], mx[:len(acc)]
			for k, x := range acc {
				f := float32(x)
				dst[k] = f
				y := float64(f)
				sq[k] += y * y
				if y < 0 {
					y = -y
				}
				if y > mx[k] || y != y {
					mx[k] = y
				}
			}
		}
		partSq[t], partMax[t] = sq, mx
	})
	sumSq, maxAbs = make([]float64, C), make([]float64, C)
	for t := range parts {
		if partSq[t] == nil {
			continue
		}
		for k := range C {
			sumSq[k] += partSq[t][k]
			if x := partMax[t][k]; x > maxAbs[k] || x != x {
				maxAbs[k] = x
			}
		}
	}
	return sumSq, maxAbs
}

// scaleGram divides column j of a by d[j] (a zero d[j] leaves the column
// as it is, see scaleColumns) and returns the Gram matrix of the result,
// in one pass over a.
func scaleGram(a *kernels.Matrix, d []float64, threads int) []float64 {
	return gramScaled(a, inverses(d), threads)
}

// columnNorms returns each column's 2-norm (maxNorm false) or
// max(1, max |entry|) (maxNorm true), the two normalisations of CP-ALS.
func columnNorms(a *kernels.Matrix, maxNorm bool, threads int) []float64 {
	R := a.Cols
	parts := rangeParts(a.Rows, float64(R), threads)
	partial := make([][]float64, parts)
	par.Range(a.Rows, parts, func(t, lo, hi int) {
		s := make([]float64, R)
		for i := lo; i < hi; i++ {
			for j, v := range a.Row(i) {
				x := float64(v)
				if maxNorm {
					s[j] = max(s[j], math.Abs(x))
				} else {
					s[j] += x * x
				}
			}
		}
		partial[t] = s
	})
	norms := make([]float64, R)
	for _, p := range partial {
		if p == nil {
			continue
		}
		for j, x := range p {
			if maxNorm {
				norms[j] = max(norms[j], x)
			} else {
				norms[j] += x
			}
		}
	}
	for j := range norms {
		if maxNorm {
			norms[j] = max(norms[j], 1)
		} else {
			norms[j] = math.Sqrt(norms[j])
		}
	}
	return norms
}

// scaleColumns divides column j of a by d[j]; a zero d[j] leaves the
// column (then all zero) as it is rather than making it NaN.
func scaleColumns(a *kernels.Matrix, d []float64, threads int) {
	R := a.Cols
	inv := inverses(d)
	par.Range(a.Rows, rangeParts(a.Rows, float64(R), threads), func(t, lo, hi int) {
		for i := lo; i < hi; i++ {
			row := a.Row(i)
			for j := range row {
				row[j] *= inv[j]
			}
		}
	})
}

// inverses returns 1/d[j] in float32, and 1 where d[j] is 0.
func inverses(d []float64) []float32 {
	inv := make([]float32, len(d))
	for j, x := range d {
		inv[j] = 1
		if x != 0 {
			inv[j] = float32(1 / x)
		}
	}
	return inv
}

// allFinite reports whether a holds no NaN or Inf.
func allFinite(a *kernels.Matrix) bool {
	for _, v := range a.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// cloneMatrix returns a deep copy of a.
func cloneMatrix(a *kernels.Matrix) *kernels.Matrix {
	return &kernels.Matrix{Rows: a.Rows, Cols: a.Cols, Data: append([]float32(nil), a.Data...)}
}

// copyMatrices copies src into dst matrix by matrix (same shapes).
func copyMatrices(dst, src []*kernels.Matrix) {
	for m := range src {
		copy(dst[m].Data, src[m].Data)
	}
}
