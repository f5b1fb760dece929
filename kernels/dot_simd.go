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

func mttkrpRuns8(dst []float32, rowBase, R, r0, groups int, o *mttkrpOperands) {
	if !useAVX {
		mttkrpRuns8Scalar(dst, rowBase, R, r0, groups, o)
		return
	}
	n := len(o.vals)
	out := o.out[:n]
	ia, A := o.inds[0][:n], o.facs[0]
	for lo := 0; lo < n; {
		row := out[lo]
		hi := lo + 1
		for hi < n && out[hi] == row {
			hi++
		}
		for g := range groups {
			off := r0 + 8*g
			var acc archsimd.Float32x8
			for k := lo; k < hi; k++ {
				t := archsimd.LoadFloat32x8((*[8]float32)(A[int(ia[k])*R+off:])).Mul(archsimd.BroadcastFloat32x8(o.vals[k]))
				for j := 1; j < o.others; j++ {
					t = t.Mul(archsimd.LoadFloat32x8((*[8]float32)(o.facs[j][int(o.inds[j][k])*R+off:])))
				}
				acc = acc.Add(t)
			}
			d := (*[8]float32)(dst[(int(row)-rowBase)*R+off:])
			acc.Add(archsimd.LoadFloat32x8(d)).Store(d)
		}
		lo = hi
	}
}

// csf3Vector computes columns [r0, r0+8·groups) of the root rows of an
// order-3 CSF with AVX2, hoisting as csfBlock does: the leaves of a fiber
// are summed, then multiplied once by the fiber's factor row. It reports
// false, doing nothing, where the CPU lacks AVX2 and FMA.
func csf3Vector(out []float32, roots, ptr0, idx1, ptr1, idx2 []uint32, vals, A1, A2 []float32, R, r0, groups int) bool {
	if !useAVX {
		return false
	}
	for f, i := range roots {
		lo, hi := int(ptr0[f]), int(ptr0[f+1])
		for g := range groups {
			off := r0 + 8*g
			var acc archsimd.Float32x8
			for j := lo; j < hi; j++ {
				var t archsimd.Float32x8
				for k := int(ptr1[j]); k < int(ptr1[j+1]); k++ {
					t = archsimd.LoadFloat32x8((*[8]float32)(A2[int(idx2[k])*R+off:])).MulAdd(archsimd.BroadcastFloat32x8(vals[k]), t)
				}
				acc = t.MulAdd(archsimd.LoadFloat32x8((*[8]float32)(A1[int(idx1[j])*R+off:])), acc)
			}
			acc.Store((*[8]float32)(out[int(i)*R+off:]))
		}
	}
	return true
}
