package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatMul holds MatMul to a float64 reference on shapes around every
// block boundary of the vector loops (rows in eights and fours, columns
// in 8, 16, 32 and 64), with zeros and negative values, on every inner-loop unit. The
// output starts dirty: MatMul must set it, not add to it.
func TestMatMul(t *testing.T) {
	eachInnerLoops(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, m := range []int{1, 2, 3, 4, 5, 8, 32, 33} {
			for _, k := range []int{0, 1, 5, 16, 32, 87} {
				for _, n := range []int{1, 4, 5, 8, 9, 16, 24, 32, 48, 64, 72, 87} {
					a, b := make([]float32, m*k), make([]float32, k*n)
					for i := range a {
						if rng.IntN(3) > 0 {
							a[i] = float32(rng.NormFloat64())
						}
					}
					for i := range b {
						b[i] = float32(rng.NormFloat64())
					}
					c := make([]float32, m*n+3)
					for i := range c {
						c[i] = 7
					}
					MatMul(c, a, b, m, k, n)
					for i := range m {
						for j := range n {
							var want, size float64
							for p := range k {
								x := float64(a[i*k+p]) * float64(b[p*n+j])
								want += x
								size += math.Abs(x)
							}
							if got := float64(c[i*n+j]); math.Abs(got-want) > 1e-5*(size+1) {
								t.Fatalf("%dx%dx%d: c[%d][%d] = %v, want %v", m, k, n, i, j, got, want)
							}
						}
					}
					for _, v := range c[m*n:] {
						if v != 7 {
							t.Fatalf("%dx%dx%d: wrote past the output", m, k, n)
						}
					}
				}
			}
		}
	})
}

func TestMatMulShortSlices(t *testing.T) {
	for _, c := range []struct {
		name                string
		lc, la, lb, m, k, n int
	}{
		{"short c", 5, 6, 6, 2, 3, 3},
		{"short a", 6, 5, 9, 2, 3, 3},
		{"short b", 6, 6, 8, 2, 3, 3},
		{"negative", 6, 6, 9, -2, 3, 3},
		{"overflowing", 6, 6, 9, math.MaxInt/2 + 1, 4, 1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			MatMul(make([]float32, c.lc), make([]float32, c.la), make([]float32, c.lb), c.m, c.k, c.n)
		}()
	}
}

// BenchmarkMatMul times the predictor network's product shapes.
func BenchmarkMatMul(b *testing.B) {
	for _, s := range [][3]int{{32, 32, 16}, {32, 32, 8}, {32, 16, 16}, {32, 8, 16}, {1, 32, 16}, {32, 1, 16}, {1, 87, 64}, {1, 64, 32}, {1, 32, 8}} {
		m, k, n := s[0], s[1], s[2]
		a, x, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		for i := range x {
			x[i] = float32(i%5) - 2
		}
		b.Run(fmt.Sprintf("%dx%dx%d", m, k, n), func(b *testing.B) {
			for b.Loop() {
				MatMul(c, a, x, m, k, n)
			}
		})
	}
}
