package kernels

// rowDot8 sets d to Σ_e vals[e]·U(col[e], off:off+8), U row-major with R
// columns. The eight sums live in local variables, which the compiler
// keeps in registers: summing into an array instead makes every entry wait
// for the previous entry's store to the same element, which measured
// twice as slow on kg_wn18.
func rowDot8(d *[8]float32, vals []float32, col []uint32, U []float32, R, off int) {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	vals = vals[:len(col)]
	for e, c := range col {
		v, u := vals[e], (*[8]float32)(U[int(c)*R+off:])
		a0 += v * u[0]
		a1 += v * u[1]
		a2 += v * u[2]
		a3 += v * u[3]
		a4 += v * u[4]
		a5 += v * u[5]
		a6 += v * u[6]
		a7 += v * u[7]
	}
	d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = a0, a1, a2, a3, a4, a5, a6, a7
}

// rowDot8Add is rowDot8 adding into d.
func rowDot8Add(d *[8]float32, vals []float32, col []uint32, U []float32, R, off int) {
	var s [8]float32
	rowDot8(&s, vals, col, U, R, off)
	for r := range d {
		d[r] += s[r]
	}
}

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
