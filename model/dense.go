package model

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// matrix is a row-major view of r x c float64s, the unit the GCN's forward
// and backward passes work in. Parameters are views into one flat vector,
// so the optimiser sees them as a single slice.
type matrix struct {
	r, c int
	d    []float64
}

func newMatrix(r, c int) matrix { return matrix{r, c, make([]float64, r*c)} }

func (m matrix) row(i int) []float64 { return m.d[i*m.c : (i+1)*m.c] }

func (m matrix) zero() { clear(m.d) }

var impl = blas64.Implementation()

// mul sets dst = alpha·op(a)·op(b) + beta·dst, op transposing when asked.
func mul(dst matrix, a matrix, ta bool, b matrix, tb bool, alpha, beta float64) {
	m, k := a.r, a.c
	ta2 := blas.NoTrans
	if ta {
		m, k, ta2 = a.c, a.r, blas.Trans
	}
	n := b.c
	tb2 := blas.NoTrans
	if tb {
		n, tb2 = b.r, blas.Trans
	}
	if dst.r != m || dst.c != n {
		panic("model: matrix shapes do not match")
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := range dst.d {
			dst.d[i] *= beta
		}
		return
	}
	impl.Dgemm(ta2, tb2, m, n, k, alpha, a.d, max(a.c, 1), b.d, max(b.c, 1), beta, dst.d, max(dst.c, 1))
}

// addOuter adds alpha·u·vᵀ (u of length dst.r, v of dst.c) to dst.
func addOuter(dst matrix, u, v []float64, alpha float64) {
	for i, ui := range u {
		if ui == 0 {
			continue
		}
		row := dst.row(i)
		s := alpha * ui
		for j, vj := range v {
			row[j] += s * vj
		}
	}
}

// vecMul sets dst (length a.c) = alpha·uᵀ·a + beta·dst, u of length a.r.
func vecMul(dst, u []float64, a matrix, alpha, beta float64) {
	for j := range dst {
		dst[j] *= beta
	}
	for i, ui := range u {
		if ui == 0 {
			continue
		}
		s := alpha * ui
		for j, aij := range a.row(i) {
			dst[j] += s * aij
		}
	}
}
