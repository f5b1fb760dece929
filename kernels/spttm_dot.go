package kernels

// csrRows8Scalar computes columns [r0, r0+8·groups) of rows [a, b) of Y for CSR
// arrays (row pointers rebased to ptr[0] = RowPtr[a]), eight columns at a
// time in registers. It is one function over the whole row range, because
// fiber matrices often have nearly one entry per row and a call per row
// would cost as much as the row.
func csrRows8Scalar(out []float32, ptr []uint32, col []uint32, vals []float32, U []float32, R, a, r0, groups int) {
	vals = vals[:len(col)]
	for i := 0; i+1 < len(ptr); i++ {
		lo, hi := int(ptr[i]), int(ptr[i+1])
		if lo > hi || hi > len(col) {
			return // malformed pointers; the formats never produce them
		}
		rc, rv := col[lo:hi], vals[lo:hi]
		rv = rv[:len(rc)]
		base := (a+i)*R + r0
		for g := range groups {
			off := r0 + 8*g
			var a0, a1, a2, a3, a4, a5, a6, a7 float32
			for e, c := range rc {
				v, u := rv[e], (*[8]float32)(U[int(c)*R+off:])
				a0 += v * u[0]
				a1 += v * u[1]
				a2 += v * u[2]
				a3 += v * u[3]
				a4 += v * u[4]
				a5 += v * u[5]
				a6 += v * u[6]
				a7 += v * u[7]
			}
			d := (*[8]float32)(out[base+8*g:])
			d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = a0, a1, a2, a3, a4, a5, a6, a7
		}
	}
}

// cooRows8Scalar computes columns [r0, r0+8·groups) of the rows of FiberCOO
// entries (rows, col, vals), which are in row order: each run of one row's
// entries is summed in registers and stored, or added when add is set.
func cooRows8Scalar(out []float32, rows, col []uint32, vals []float32, U []float32, R, r0, groups int, add bool) {
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
			var a0, a1, a2, a3, a4, a5, a6, a7 float32
			for e, c := range rc {
				v, u := rv[e], (*[8]float32)(U[int(c)*R+off:])
				a0 += v * u[0]
				a1 += v * u[1]
				a2 += v * u[2]
				a3 += v * u[3]
				a4 += v * u[4]
				a5 += v * u[5]
				a6 += v * u[6]
				a7 += v * u[7]
			}
			d := (*[8]float32)(out[int(row)*R+off:])
			if add {
				d[0], d[1], d[2], d[3] = d[0]+a0, d[1]+a1, d[2]+a2, d[3]+a3
				d[4], d[5], d[6], d[7] = d[4]+a4, d[5]+a5, d[6]+a6, d[7]+a7
			} else {
				d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = a0, a1, a2, a3, a4, a5, a6, a7
			}
		}
		lo = hi
	}
}

// ellSlots8Scalar adds slot arrays (col, vals) of consecutive rows from lo
// into columns [r0, r0+8·groups) of their output rows.
func ellSlots8Scalar(out []float32, col []uint32, vals []float32, U []float32, R, lo, r0, groups int) {
	vals = vals[:len(col)]
	for j, c := range col {
		v := vals[j]
		for g := range groups {
			off := r0 + 8*g
			u, d := (*[8]float32)(U[int(c)*R+off:]), (*[8]float32)(out[(lo+j)*R+off:])
			d[0] += v * u[0]
			d[1] += v * u[1]
			d[2] += v * u[2]
			d[3] += v * u[3]
			d[4] += v * u[4]
			d[5] += v * u[5]
			d[6] += v * u[6]
			d[7] += v * u[7]
		}
	}
}
