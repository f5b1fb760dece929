package kernels

import "github.com/sparsetune/sparsetune/formats"

// Rank blocking. Every kernel processes the R columns in blocks of
// 64, 32, 16, 8, 4, 2 and 1 (greedy, so R = 16 is one block and R = 7 is
// 4+2+1), one pass over the nonzeros per block. The kernels are generic
// over a pointer to a fixed-size array, block; Go compiles one copy per
// array length (GC shape stenciling treats each length as its own shape),
// so inside a kernel every row loop has a constant trip count and indexes
// an array, which needs no bounds check, and converting a factor row to
// the array pointer costs one length check per row instead of one per
// element.
type block interface {
	*[1]float32 | *[2]float32 | *[4]float32 | *[8]float32 | *[16]float32 | *[32]float32 | *[64]float32
}

// cooChunk runs the COO kernel on n nonzeros whose mode-m indices are
// inds[m][:n] and values vals[:n], adding into the rows of dst (dst row 0 is
// output row rowBase). It is shared by COO, and by HiCOO and ALTO after
// they decode a chunk of indices.
func (p *MTTKRP) cooChunk(ws *mttkrpScratch, inds *[formats.MaxOrder][]uint32, vals []float32, dst []float32, rowBase int) {
	if len(vals) == 0 {
		return
	}
	r0 := 0
	var ops *mttkrpOperands
	for _, w := range p.widths {
		if w >= 8 {
			// A block of registers: vector assembly where the CPU has
			// it, eight Go locals otherwise (vec.go).
			if ops == nil {
				ops = &ws.ops
				ops.out, ops.vals, ops.others = inds[p.mode][:len(vals)], vals, len(p.others)
				ops.scatter = p.scatter
				for j, m := range p.others {
					ops.inds[j], ops.facs[j] = inds[m][:len(vals)], p.fac[m]
				}
			}
			mttkrpRuns8(dst, rowBase, p.ld, r0, w/8, ops)
			r0 += w
			continue
		}
		switch w {
		case 64:
			cooBlock[*[64]float32](p, ws, inds, vals, dst, rowBase, r0)
		case 32:
			cooBlock[*[32]float32](p, ws, inds, vals, dst, rowBase, r0)
		case 16:
			cooBlock[*[16]float32](p, ws, inds, vals, dst, rowBase, r0)
		case 8:
			cooBlock[*[8]float32](p, ws, inds, vals, dst, rowBase, r0)
		case 4:
			cooBlock[*[4]float32](p, ws, inds, vals, dst, rowBase, r0)
		case 2:
			cooBlock[*[2]float32](p, ws, inds, vals, dst, rowBase, r0)
		default:
			cooBlock[*[1]float32](p, ws, inds, vals, dst, rowBase, r0)
		}
		r0 += w
	}
}

// cooBlock is cooChunk for the rank columns [r0, r0+len(*B)). Nonzeros
// with the same output index in a row (a run: common in sorted COO and in
// ALTO order) are summed in a scratch row and written once per run.
func cooBlock[B block](p *MTTKRP, ws *mttkrpScratch, inds *[formats.MaxOrder][]uint32, vals []float32, dst []float32, rowBase, r0 int) {
	R := p.ld
	acc := B(ws.rows[0][:])
	clear(ws.rows[0][:])
	out := inds[p.mode][:len(vals)]
	cur := out[0]
	flush := func() {
		d := B(dst[(int(cur)-rowBase)*R+r0:])
		for r := 0; r < len(acc); r++ {
			d[r] += acc[r]
			acc[r] = 0
		}
	}
	switch len(p.others) {
	case 1:
		ia, A := inds[p.others[0]][:len(vals)], p.fac[p.others[0]]
		for k, v := range vals {
			if out[k] != cur {
				flush()
				cur = out[k]
			}
			a := B(A[int(ia[k])*R+r0:])
			for r := 0; r < len(acc); r++ {
				acc[r] += v * a[r]
			}
		}
	case 2:
		ia, A := inds[p.others[0]][:len(vals)], p.fac[p.others[0]]
		ib, Bf := inds[p.others[1]][:len(vals)], p.fac[p.others[1]]
		for k, v := range vals {
			if out[k] != cur {
				flush()
				cur = out[k]
			}
			a := B(A[int(ia[k])*R+r0:])
			b := B(Bf[int(ib[k])*R+r0:])
			for r := 0; r < len(acc); r++ {
				acc[r] += v * a[r] * b[r]
			}
		}
	default:
		tmp := B(ws.rows[1][:])
		m0, rest := p.others[0], p.others[1:]
		ia, A := inds[m0][:len(vals)], p.fac[m0]
		for k, v := range vals {
			if out[k] != cur {
				flush()
				cur = out[k]
			}
			a := B(A[int(ia[k])*R+r0:])
			for r := 0; r < len(tmp); r++ {
				tmp[r] = v * a[r]
			}
			for _, m := range rest {
				b := B(p.fac[m][int(inds[m][k])*R+r0:])
				for r := 0; r < len(tmp); r++ {
					tmp[r] *= b[r]
				}
			}
			for r := 0; r < len(acc); r++ {
				acc[r] += tmp[r]
			}
		}
	}
	flush()
}
