//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// Built with GOEXPERIMENT=simd, the SpTTM row kernel uses 8-wide AVX
// vectors with fused multiply-add where the CPU has AVX2 and FMA; a row's
// eight columns are then one register instead of eight.
var useAVX = archsimd.X86.AVX2() && archsimd.X86.FMA()

// InnerLoops says which inner loops the build uses (sparsetune bench
// prints it).
func InnerLoops() string {
	if useAVX {
		return "avx2+fma"
	}
	return "scalar (no AVX2/FMA on this CPU)"
}

func csrRows8(out []float32, ptr []uint32, col []uint32, vals []float32, U []float32, R, a, r0, groups int) {
	if !useAVX {
		csrRows8Scalar(out, ptr, col, vals, U, R, a, r0, groups)
		return
	}
	vals = vals[:len(col)]
	for i := 0; i+1 < len(ptr); i++ {
		lo, hi := int(ptr[i]), int(ptr[i+1])
		if lo > hi || hi > len(col) {
			return
		}
		rc, rv := col[lo:hi], vals[lo:hi]
		rv = rv[:len(rc)]
		base := (a+i)*R + r0
		g := 0
		// Sixteen columns per pass over the row's entries: two
		// accumulators share each entry's broadcast value.
		for ; g+2 <= groups; g += 2 {
			off := r0 + 8*g
			var acc0, acc1 archsimd.Float32x8
			for e, c := range rc {
				u := (*[16]float32)(U[int(c)*R+off:])
				v := archsimd.BroadcastFloat32x8(rv[e])
				acc0 = archsimd.LoadFloat32x8((*[8]float32)(u[:8])).MulAdd(v, acc0)
				acc1 = archsimd.LoadFloat32x8((*[8]float32)(u[8:])).MulAdd(v, acc1)
			}
			d := (*[16]float32)(out[base+8*g:])
			acc0.Store((*[8]float32)(d[:8]))
			acc1.Store((*[8]float32)(d[8:]))
		}
		if g < groups {
			off := r0 + 8*g
			var acc archsimd.Float32x8
			for e, c := range rc {
				u := archsimd.LoadFloat32x8((*[8]float32)(U[int(c)*R+off:]))
				acc = u.MulAdd(archsimd.BroadcastFloat32x8(rv[e]), acc)
			}
			acc.Store((*[8]float32)(out[base+8*g:]))
		}
	}
}
