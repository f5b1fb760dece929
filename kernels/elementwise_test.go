package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestElementwise holds Add, Sub, Mul and Relu to Go's arithmetic on
// every length around the vector widths, on every inner-loop unit, with
// the operands longer than dst and NaN, ±Inf and -0 among the values.
func TestElementwise(t *testing.T) {
	ops := []struct {
		name string
		f    func(dst, x, y []float32)
		want func(x, y float32) float32
	}{
		{"add", Add, func(x, y float32) float32 { return x + y }},
		{"sub", Sub, func(x, y float32) float32 { return x - y }},
		{"mul", Mul, func(x, y float32) float32 { return x * y }},
		{"relu", func(dst, x, y []float32) { Relu(dst, x) }, func(x, y float32) float32 { return max(x, 0) }},
	}
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0}
	eachInnerLoops(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, op := range ops {
			for n := range 70 {
				x, y := make([]float32, n+5), make([]float32, n+3)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
					if rng.IntN(9) == 0 {
						x[i] = special[rng.IntN(len(special))]
					}
				}
				for i := range y {
					y[i] = float32(rng.NormFloat64())
				}
				dst := make([]float32, n+1)
				dst[n] = 42
				op.f(dst[:n], x, y)
				for i := range n {
					w := op.want(x[i], y[i])
					if got := dst[i]; got != w && !(got != got && w != w) {
						t.Fatalf("%s, %d floats: dst[%d] = %v, want %v (x %v, y %v)", op.name, n, i, got, w, x[i], y[i])
					}
				}
				if dst[n] != 42 {
					t.Fatalf("%s, %d floats: wrote past dst", op.name, n)
				}
			}
		}
	})
	defer func() {
		if recover() == nil {
			t.Error("Add with a short operand: no panic")
		}
	}()
	Add(make([]float32, 4), make([]float32, 4), make([]float32, 3))
}

func BenchmarkElementwise(b *testing.B) {
	x, y, dst := make([]float32, 512), make([]float32, 512), make([]float32, 512)
	b.Run("add512", func(b *testing.B) {
		for b.Loop() {
			Add(dst, x, y)
		}
	})
	b.Run("relu512", func(b *testing.B) {
		for b.Loop() {
			Relu(dst, x)
		}
	})
}
