package kernels

// mttkrpOperands are the arrays of one chunk of nonzeros that the
// eight-column MTTKRP loops read: the output-mode indices, the indices and
// factor of each other mode, and the values.
type mttkrpOperands struct {
	out    []uint32
	inds   [maxOthers][]uint32
	facs   [maxOthers][]float32
	others int
	vals   []float32
	// scatter: add each nonzero into its row rather than summing runs
	// first (the plan sets it where runs are short: see shortRuns).
	scatter bool

	// The assembly loops' view of inds and facs: first elements, and
	// factor bases at the rank block's first column. They live here, in
	// the plan's scratch, because arrays passed to a function value
	// escape, and a Run must not allocate.
	indp [maxOthers]*uint32
	facp [maxOthers]*float32
}

const maxOthers = 7 // formats.MaxOrder - 1

// mttkrpRuns8Scalar adds columns [r0, r0+8·groups) of the chunk's MTTKRP
// into the rows of dst (row 0 = output row rowBase): each run of nonzeros
// with one output index is summed in registers (eight locals) and added to
// its row once.
func mttkrpRuns8Scalar(dst []float32, rowBase, R, r0, groups int, o *mttkrpOperands) {
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
			var a0, a1, a2, a3, a4, a5, a6, a7 float32
			for k := lo; k < hi; k++ {
				v, a := o.vals[k], (*[8]float32)(A[int(ia[k])*R+off:])
				t0, t1, t2, t3 := v*a[0], v*a[1], v*a[2], v*a[3]
				t4, t5, t6, t7 := v*a[4], v*a[5], v*a[6], v*a[7]
				for j := 1; j < o.others; j++ {
					b := (*[8]float32)(o.facs[j][int(o.inds[j][k])*R+off:])
					t0, t1, t2, t3 = t0*b[0], t1*b[1], t2*b[2], t3*b[3]
					t4, t5, t6, t7 = t4*b[4], t5*b[5], t6*b[6], t7*b[7]
				}
				a0, a1, a2, a3 = a0+t0, a1+t1, a2+t2, a3+t3
				a4, a5, a6, a7 = a4+t4, a5+t5, a6+t6, a7+t7
			}
			d := (*[8]float32)(dst[(int(row)-rowBase)*R+off:])
			d[0], d[1], d[2], d[3] = d[0]+a0, d[1]+a1, d[2]+a2, d[3]+a3
			d[4], d[5], d[6], d[7] = d[4]+a4, d[5]+a5, d[6]+a6, d[7]+a7
		}
		lo = hi
	}
}
