package decomp

import (
	"testing"

	"github.com/sparsetune/sparsetune/kernels"
)

// BenchmarkDense times CP-ALS's two dense passes per mode at rank 16 on
// 30000 rows: the solve A = M·V⁻¹ (with the column norms) and the scaled
// Gram matrix. (gonum's blas64 Dgemm, with the float32 <-> float64
// conversions it needs, and blas32 Sgemm were both slower than these
// loops on the 2-core test VM, so they are not used.)
func BenchmarkDense(b *testing.B) {
	I, R := 30000, 16
	m := randomFactors([]int{I}, []int{R}, 1)[0]
	a := kernels.NewMatrix(I, R)
	s := make([]float64, R*R)
	for k := range s {
		s[k] = float64(k%5) * 0.1
	}
	d := make([]float64, R)
	for k := range d {
		d[k] = 1
	}
	b.Run("solve", func(b *testing.B) {
		for range b.N {
			_, _ = mulSmall(a, m, s, 0)
		}
	})
	b.Run("gram", func(b *testing.B) {
		for range b.N {
			scaleGram(a, d, 0)
		}
	})
}
