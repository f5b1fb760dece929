package kernels

import "fmt"

// MatMul sets c (m × n) to a (m × k) · b (k × n), all dense and
// row-major. It runs on the calling goroutine.
//
// It is for small products, such as the layers of the format predictor's
// network (32 × 32 matrices and smaller), where a general GEMM spends more
// on blocking and dispatch than on the product. Eight or four rows of c
// are made at a time, their columns in vector registers, so that their
// multiply-adds overlap (BenchmarkMatMul). It panics if a dimension is
// negative or a slice is shorter than its shape.
func MatMul(c, a, b []float32, m, k, n int) {
	if m < 0 || k < 0 || n < 0 || !holds(len(a), m, k) || !holds(len(b), k, n) || !holds(len(c), m, n) {
		panic(fmt.Sprintf("kernels: MatMul of %d×%d by %d×%d into %d outputs from %d and %d values", m, k, k, n, len(c), len(a), len(b)))
	}
	if k == 0 {
		clear(c[:m*n])
		return
	}
	j0 := matMulVec(c, a, b, m, k, n)
	if j0 == n {
		return
	}
	// The columns the vector loops leave (n mod 8), row by row.
	for i := range m {
		ci := c[i*n+j0 : (i+1)*n]
		clear(ci)
		for p, v := range a[i*k : (i+1)*k] {
			bp := b[p*n+j0 : (p+1)*n]
			bp = bp[:len(ci)]
			for q := range ci {
				ci[q] += v * bp[q]
			}
		}
	}
}

// holds reports whether a slice of length l holds an r × c matrix, without
// the product r·c overflowing (r and c are not negative).
func holds(l, r, c int) bool { return r == 0 || c <= l/r }
