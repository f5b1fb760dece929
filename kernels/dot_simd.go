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

func cooRows8(out []float32, rows, col []uint32, vals []float32, U []float32, R, r0, groups int, add bool) {
	if !useAVX {
		cooRows8Scalar(out, rows, col, vals, U, R, r0, groups, add)
		return
	}
	col, vals = col[:len(rows)], vals[:len(rows)]
	for lo := 0; lo < len(rows); {
		row := rows[lo]
		hi := lo + 1
		for hi < len(rows) && rows[hi] == row {
			hi++
		}
		rc, rv := col[lo:hi], vals[lo:hi]
		for g := range groups {
			off := r0 + 8*g
			var acc archsimd.Float32x8
			for e, c := range rc {
				u := archsimd.LoadFloat32x8((*[8]float32)(U[int(c)*R+off:]))
				acc = u.MulAdd(archsimd.BroadcastFloat32x8(rv[e]), acc)
			}
			d := (*[8]float32)(out[int(row)*R+off:])
			if add {
				acc = acc.Add(archsimd.LoadFloat32x8(d))
			}
			acc.Store(d)
		}
		lo = hi
	}
}

func ellSlots8(out []float32, col []uint32, vals []float32, U []float32, R, lo, r0, groups int) {
	if !useAVX {
		ellSlots8Scalar(out, col, vals, U, R, lo, r0, groups)
		return
	}
	vals = vals[:len(col)]
	for j, c := range col {
		v := archsimd.BroadcastFloat32x8(vals[j])
		for g := range groups {
			off := r0 + 8*g
			d := (*[8]float32)(out[(lo+j)*R+off:])
			u := archsimd.LoadFloat32x8((*[8]float32)(U[int(c)*R+off:]))
			u.MulAdd(v, archsimd.LoadFloat32x8(d)).Store(d)
		}
	}
}
