package kernels

import (
	"fmt"
	"sort"

	"github.com/sparsetune/sparsetune/formats"
)

// csfMTTKRP is the CSF kernel: part t owns root fibers [first[t], first[t+1]).
type csfMTTKRP struct {
	x     *formats.CSF
	first []int
}

// NewCSFMTTKRP builds the MTTKRP plan of a CSF tensor for a 0-based mode
// and rank, using threads goroutines (0 for GOMAXPROCS).
//
// The CSF must be rooted at the output mode (x.ModeOrder[0] == mode);
// otherwise NewCSFMTTKRP returns an error. Like SPLATT's one-CSF-per-mode
// setting, this keeps the kernel owner-computes: each root fiber is one
// output row, so parts never write the same row and need neither locks nor
// private copies. A caller running every mode builds one CSF per mode
// (formats.NewCSF with the mode first); a kernel for a non-root mode would
// need privatisation and is not provided.
//
// Parallel strategy: root fibers are split into contiguous parts holding
// equal numbers of nonzeros (from LeafStarts), not equal numbers of
// fibers. Each part writes its root rows and zeroes the output rows between
// them.
//
// Hoisting (SPLATT): a fiber's value is the sum of its children's values
// times the factor row of its own index, so the leaves of a fiber are
// summed first (one multiply-add per nonzero and rank column) and the
// product with each upper factor row is taken once per fiber on the way
// up, not once per nonzero.
func NewCSFMTTKRP(x *formats.CSF, mode, rank, threads int) (*MTTKRP, error) {
	if err := formats.CheckDims(x.Dims); err != nil {
		return nil, err
	}
	if len(x.ModeOrder) != len(x.Dims) || len(x.FiberIdx) != len(x.Dims) || len(x.FiberPtr) != len(x.Dims)-1 {
		return nil, fmt.Errorf("mttkrp csf: malformed CSF: %d modes, %d levels, %d pointer arrays", len(x.Dims), len(x.FiberIdx), len(x.FiberPtr))
	}
	if err := checkCSF(x); err != nil {
		return nil, fmt.Errorf("mttkrp csf: %w", err)
	}
	p, err := newPlan("csf", x.Dims, x.NNZ(), mode, rank, threads)
	if err != nil {
		return nil, err
	}
	p.xbytes = x.Bytes()
	if x.Root() != mode {
		return nil, fmt.Errorf("mttkrp csf: CSF rooted at mode %d, output mode %d: %w", x.Root(), mode, errNotRoot)
	}
	k := &csfMTTKRP{x: x, first: make([]int, p.parts+1)}
	roots := x.FiberIdx[0]
	nr, n := len(roots), x.NNZ()
	if nr > 0 {
		starts := x.LeafStarts(0)
		for t := 1; t < p.parts; t++ {
			target := uint32(t * n / p.parts)
			k.first[t] = sort.Search(nr, func(f int) bool { return starts[f] >= target })
		}
	}
	k.first[p.parts] = nr
	rows := x.Dims[mode]
	lo, hi := make([]int, p.parts), make([]int, p.parts)
	for t := range p.parts {
		if t > 0 {
			lo[t] = rows
			if k.first[t] < nr {
				lo[t] = int(roots[k.first[t]])
			}
			hi[t-1] = lo[t]
		}
	}
	hi[p.parts-1] = rows
	p.kernel = k
	p.rowLo, p.rowHi = lo, hi
	p.priv = make([][]float32, p.parts)
	p.zero = make([][]rowRange, p.parts)
	p.selfZero = true
	return p, nil
}

func (k *csfMTTKRP) compute(p *MTTKRP, t int, out []float32, _ int) {
	f0, f1 := k.first[t], k.first[t+1]
	R := p.ld
	// Zero the rows of this part's interval that no root fiber writes.
	prev := p.rowLo[t]
	for _, i := range k.x.FiberIdx[0][f0:f1] {
		clear(out[prev*R : int(i)*R])
		prev = int(i) + 1
	}
	clear(out[prev*R : p.rowHi[t]*R])
	if f0 == f1 {
		return
	}
	r0 := 0
	for _, w := range p.widths {
		if w >= 8 && csfVector(out, k.x, f0, f1, &p.fac, R, r0, w/8) {
			r0 += w
			continue
		}
		switch w {
		case 64:
			csfBlock[*[64]float32](p, k, t, f0, f1, out, r0)
		case 32:
			csfBlock[*[32]float32](p, k, t, f0, f1, out, r0)
		case 16:
			csfBlock[*[16]float32](p, k, t, f0, f1, out, r0)
		case 8:
			csfBlock[*[8]float32](p, k, t, f0, f1, out, r0)
		case 4:
			csfBlock[*[4]float32](p, k, t, f0, f1, out, r0)
		case 2:
			csfBlock[*[2]float32](p, k, t, f0, f1, out, r0)
		default:
			csfBlock[*[1]float32](p, k, t, f0, f1, out, r0)
		}
		r0 += w
	}
}

// csfBlock computes rank columns [r0, r0+len(*B)) of the root rows of
// fibers [f0, f1).
func csfBlock[B block](p *MTTKRP, k *csfMTTKRP, t, f0, f1 int, out []float32, r0 int) {
	x, R := k.x, p.ld
	ws := p.ws[t]
	roots := x.FiberIdx[0][f0:f1]
	ptr0 := x.FiberPtr[0][f0 : f1+1]
	acc := B(ws.rows[0][:])
	switch x.Order() {
	case 2:
		A, idx1 := p.fac[x.ModeOrder[1]], x.FiberIdx[1]
		for f, i := range roots {
			lo, hi := ptr0[f], ptr0[f+1]
			leafSum(acc, idx1[lo:hi], x.Vals[lo:hi], A, R, r0)
			d := B(out[int(i)*R+r0:])
			for r := 0; r < len(d); r++ {
				d[r] = acc[r]
			}
		}
	case 3:
		A1, idx1, ptr1 := p.fac[x.ModeOrder[1]], x.FiberIdx[1], x.FiberPtr[1]
		A2, idx2 := p.fac[x.ModeOrder[2]], x.FiberIdx[2]
		tmp := B(ws.rows[1][:])
		for f, i := range roots {
			for r := 0; r < len(acc); r++ {
				acc[r] = 0
			}
			lo, hi := ptr0[f], ptr0[f+1]
			fib := idx1[lo:hi]
			fptr := ptr1[lo : hi+1]
			for j, jj := range fib {
				a, b := fptr[j], fptr[j+1]
				leafSum(tmp, idx2[a:b], x.Vals[a:b], A2, R, r0)
				c := B(A1[int(jj)*R+r0:])
				for r := 0; r < len(acc); r++ {
					acc[r] += tmp[r] * c[r]
				}
			}
			d := B(out[int(i)*R+r0:])
			for r := 0; r < len(d); r++ {
				d[r] = acc[r]
			}
		}
	default:
		for f, i := range roots {
			csfFiber[B](p, x, ws, 0, f0+f, r0)
			d := B(out[int(i)*R+r0:])
			for r := 0; r < len(d); r++ {
				d[r] = acc[r]
			}
		}
	}
}

// leafSum sets acc to Σ_k vals[k]·A(idx[k], r0:r0+len(*B)).
func leafSum[B block](acc B, idx []uint32, vals []float32, A []float32, R, r0 int) {
	vals = vals[:len(idx)]
	a := B(A[int(idx[0])*R+r0:])
	v := vals[0]
	for r := 0; r < len(acc); r++ {
		acc[r] = v * a[r]
	}
	for q := 1; q < len(idx); q++ {
		a := B(A[int(idx[q])*R+r0:])
		v := vals[q]
		for r := 0; r < len(acc); r++ {
			acc[r] += v * a[r]
		}
	}
}

// csfFiber sets scratch row l to the sum over the children of fiber f of
// level l of their values; a child's value is its subtree's sum times the
// factor row of its index (a leaf's: its value times the factor row). It
// is the any-order path; orders 2 and 3 are unrolled in csfBlock.
func csfFiber[B block](p *MTTKRP, x *formats.CSF, ws *mttkrpScratch, l, f, r0 int) {
	R, N := p.ld, x.Order()
	lo, hi := x.FiberPtr[l][f], x.FiberPtr[l][f+1]
	acc := B(ws.rows[l][:])
	if l == N-2 {
		leafSum(acc, x.FiberIdx[N-1][lo:hi], x.Vals[lo:hi], p.fac[x.ModeOrder[N-1]], R, r0)
		return
	}
	for r := 0; r < len(acc); r++ {
		acc[r] = 0
	}
	A := p.fac[x.ModeOrder[l+1]]
	child := B(ws.rows[l+1][:])
	for c := int(lo); c < int(hi); c++ {
		csfFiber[B](p, x, ws, l+1, c, r0)
		a := B(A[int(x.FiberIdx[l+1][c])*R+r0:])
		for r := 0; r < len(acc); r++ {
			acc[r] += child[r] * a[r]
		}
	}
}
