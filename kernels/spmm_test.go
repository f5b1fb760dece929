package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSpMM holds SpMM to a dense float64 product, over ranks that use the
// vector loops, the scalar remainder and both, with empty rows and zeros.
func TestSpMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ rows, k, R int }{{1, 1, 1}, {3, 5, 5}, {32, 32, 32}, {32, 32, 5}, {1, 151, 64}, {7, 9, 13}, {4, 3, 24}, {0, 4, 8}} {
		a := make([]float32, c.rows*c.k)
		for i := range a {
			if rng.IntN(3) > 0 {
				a[i] = rng.Float32()*2 - 1
			}
		}
		u := make([]float32, c.k*c.R)
		for i := range u {
			u[i] = rng.Float32()*2 - 1
		}
		ptr := []uint32{0}
		var col []uint32
		var vals []float32
		for i := range c.rows {
			for j := range c.k {
				if v := a[i*c.k+j]; v != 0 {
					col, vals = append(col, uint32(j)), append(vals, v)
				}
			}
			ptr = append(ptr, uint32(len(col)))
		}
		out := make([]float32, c.rows*c.R)
		for i := range out {
			out[i] = float32(math.NaN()) // every output must be written
		}
		SpMM(out, ptr, col, vals, u, c.R)
		for i := range c.rows {
			for r := range c.R {
				var want float64
				for j := range c.k {
					want += float64(a[i*c.k+j]) * float64(u[j*c.R+r])
				}
				if got := out[i*c.R+r]; !(math.Abs(float64(got)-want) <= 1e-5*(1+math.Abs(want))) {
					t.Fatalf("%+v: out[%d][%d] = %v, want %v", c, i, r, got, want)
				}
			}
		}
	}
}

func TestSpMMPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"column beyond U": func() { SpMM(make([]float32, 8), []uint32{0, 1}, []uint32{2}, []float32{1}, make([]float32, 16), 8) },
		"short out":       func() { SpMM(make([]float32, 4), []uint32{0, 1}, []uint32{0}, []float32{1}, make([]float32, 8), 8) },
		"bad pointers":    func() { SpMM(make([]float32, 8), []uint32{0, 3}, []uint32{0}, []float32{1}, make([]float32, 8), 8) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
