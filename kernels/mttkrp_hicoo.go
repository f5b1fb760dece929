package kernels

import (
	"fmt"
	"sort"

	"github.com/sparsetune/sparsetune/formats"
)

// hicooMTTKRP is the HiCOO kernel: part t owns blocks [first[t], first[t+1]).
type hicooMTTKRP struct {
	x     *formats.HiCOO
	first []int
}

// NewHiCOOMTTKRP builds the MTTKRP plan of a HiCOO tensor for a 0-based
// mode and rank, using threads goroutines (0 for GOMAXPROCS).
//
// Parallel strategy: the Z-ordered blocks are split into contiguous parts
// holding equal numbers of nonzeros (from BlockPtr). Z order does not keep
// a part's output rows apart from the next part's, so output conflicts are
// resolved by privatisation, as for COO: a part whose output rows overlap
// an earlier direct part's accumulates into a private copy of just the rows
// it touches, added into the output by a parallel reduction over rows.
//
// Each block is processed in chunks whose indices are rebuilt (block
// coordinate << b | offset) into per-part scratch and then run through the
// COO inner loop, so the 8-bit offsets are what is streamed from memory and
// the decode is N integer operations per nonzero against N·R flops.
func NewHiCOOMTTKRP(x *formats.HiCOO, mode, rank, threads int) (*MTTKRP, error) {
	if err := formats.CheckDims(x.Dims); err != nil {
		return nil, err
	}
	if err := checkHiCOO(x); err != nil {
		return nil, fmt.Errorf("mttkrp hicoo: %w", err)
	}
	p, err := newPlan("hicoo", x.Dims, x.NNZ(), mode, rank, threads)
	if err != nil {
		return nil, err
	}
	p.xbytes = x.Bytes()
	nb, n := x.NumBlocks(), x.NNZ()
	k := &hicooMTTKRP{x: x, first: make([]int, p.parts+1)}
	for t := 1; t < p.parts; t++ {
		target := uint32(t * n / p.parts)
		k.first[t] = sort.Search(nb, func(b int) bool { return x.BlockPtr[b] >= target })
	}
	k.first[p.parts] = nb
	lo, hi := make([]int, p.parts), make([]int, p.parts)
	changes := 0
	for t := range p.parts {
		lo[t], hi[t] = x.Dims[mode], 0
		for b := k.first[t]; b < k.first[t+1]; b++ {
			base := int(x.BlockInds[mode][b]) << x.BlockBits
			prev := -1
			for _, e := range x.ElemInds[mode][x.BlockPtr[b]:x.BlockPtr[b+1]] {
				lo[t] = min(lo[t], base+int(e))
				hi[t] = max(hi[t], base+int(e)+1)
				if int(e) != prev {
					changes++
					prev = int(e)
				}
			}
		}
	}
	p.scatter = shortRuns(changes, n)
	for _, ws := range p.ws {
		for m := range x.Dims {
			ws.idx[m] = make([]uint32, chunkNNZ)
		}
	}
	p.kernel = k
	p.placeRows(lo, hi)
	return p, nil
}

func (k *hicooMTTKRP) compute(p *MTTKRP, t int, dst []float32, rowBase int) {
	x, ws := k.x, p.ws[t]
	if p.scatter && p.widths[len(p.widths)-1] >= 8 && k.computeFused(p, t, dst, rowBase) {
		return
	}
	var inds [formats.MaxOrder][]uint32
	// Blocks of a sparse tensor often hold a few nonzeros each, so chunks
	// are filled across block boundaries: one kernel call per chunkNNZ
	// nonzeros, not one per block.
	fill, start := 0, int(x.BlockPtr[k.first[t]])
	flush := func() {
		for m := range x.ElemInds {
			inds[m] = ws.idx[m][:fill]
		}
		p.cooChunk(ws, &inds, x.Vals[start:start+fill], dst, rowBase)
		start += fill
		fill = 0
	}
	for b := k.first[t]; b < k.first[t+1]; b++ {
		end := int(x.BlockPtr[b+1])
		for a := int(x.BlockPtr[b]); a < end; {
			c := min(end, a+chunkNNZ-fill)
			for m, elems := range x.ElemInds {
				decodeOffsets(ws.idx[m][fill:fill+c-a], elems[a:c], x.BlockInds[m][b]<<x.BlockBits)
			}
			fill += c - a
			a = c
			if fill == chunkNNZ {
				flush()
			}
		}
	}
	if fill > 0 {
		flush()
	}
}

// computeFused runs part t of an order-3 or order-4 HiCOO MTTKRP whose
// runs are short with the index rebuild inside the vector loop
// (hicooScatterVec): no decoded index is stored and read back. It reports
// false, having done nothing, for another order or where the CPU has no
// vector loops. The rank blocks must all be at least 8 wide.
func (k *hicooMTTKRP) computeFused(p *MTTKRP, t int, dst []float32, rowBase int) bool {
	N := k.x.Order()
	if N != 3 && N != 4 {
		return false
	}
	var modes [4]int
	var facs [3][]float32
	modes[0] = p.mode
	copy(modes[1:], p.others)
	for j, m := range p.others {
		facs[j] = p.fac[m]
	}
	r0 := 0
	for _, w := range p.widths {
		if !hicooScatterVec(dst, k.x, k.first[t], k.first[t+1], modes[:N], facs[:N-1], rowBase, p.ld, r0, w) {
			return false
		}
		r0 += w
	}
	return true
}

// decodeOffsets sets dst[i] = base | uint32(off[i]).
func decodeOffsets(dst []uint32, off []uint8, base uint32) {
	off = off[:len(dst)]
	for i := range dst {
		dst[i] = base | uint32(off[i])
	}
}
