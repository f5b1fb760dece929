package kernels

import (
	"fmt"
	"sort"

	"github.com/sparsetune/sparsetune/formats"
)

// altoMTTKRP is the ALTO kernel: part t owns nonzeros [start[t], start[t+1]).
type altoMTTKRP struct {
	x     *formats.ALTO
	start []int
}

// NewALTOMTTKRP builds the MTTKRP plan of an ALTO tensor (with or without
// BLCO blocks) for a 0-based mode and rank, using threads goroutines (0 for
// GOMAXPROCS).
//
// Parallel strategy: the nonzeros, in ALTO order, are split into equal
// contiguous parts. ALTO order bounds the range of every mode's index in a
// contiguous run of nonzeros, so each part touches an interval of output
// rows; conflicts are resolved by privatisation as for COO (a part whose
// interval overlaps an earlier direct part's gets a private copy of only
// that interval, added in by a parallel reduction over rows).
//
// Each part decodes a chunk of linear indices at a time into per-mode
// uint32 scratch (ALTOMode.Decode, with the block's high word folded in
// once per BLCO block) and runs the COO inner loop on it, which sums runs
// of equal output index in a register row and writes the row once per run.
func NewALTOMTTKRP(x *formats.ALTO, mode, rank, threads int) (*MTTKRP, error) {
	if err := formats.CheckDims(x.Dims); err != nil {
		return nil, err
	}
	if err := checkALTO(x); err != nil {
		return nil, fmt.Errorf("mttkrp alto: %w", err)
	}
	p, err := newPlan("alto", x.Dims, x.NNZ(), mode, rank, threads)
	if err != nil {
		return nil, err
	}
	p.xbytes = x.Bytes()
	n := x.NNZ()
	k := &altoMTTKRP{x: x, start: make([]int, p.parts+1)}
	for t := range p.parts + 1 {
		k.start[t] = t * n / p.parts
	}
	for _, ws := range p.ws {
		for m := range x.Dims {
			ws.idx[m] = make([]uint32, chunkNNZ)
		}
	}
	lo, hi := make([]int, p.parts), make([]int, p.parts)
	changes := 0
	for t := range p.parts {
		lo[t], hi[t] = x.Dims[mode], 0
		buf := p.ws[t].idx[mode]
		k.segments(t, func(b, a, c int) {
			e := &x.Modes[mode]
			decodeALTO(e, buf[:c-a], x.Lin[a:c], blockBase(x, e, b))
			l, h, ch := rowSpanChanges(buf[:c-a])
			changes += ch + 1
			lo[t], hi[t] = min(lo[t], l), max(hi[t], h)
		})
	}
	p.scatter = shortRuns(changes, n)
	p.kernel = k
	p.placeRows(lo, hi)
	return p, nil
}

// segments calls fn(b, a, c) for each chunk [a, c) of part t's nonzeros,
// chunks at most chunkNNZ long and inside one BLCO block b.
func (k *altoMTTKRP) segments(t int, fn func(b, a, c int)) {
	x := k.x
	s, e := k.start[t], k.start[t+1]
	if s >= e {
		return
	}
	b := sort.Search(x.NumBlocks(), func(b int) bool { return int(x.BlockPtr[b+1]) > s })
	for a := s; a < e; b++ {
		end := min(e, int(x.BlockPtr[b+1]))
		for a < end {
			c := min(a+chunkNNZ, end)
			fn(b, a, c)
			a = c
		}
	}
}

// blockBase returns the index bits mode e of x takes from block b's high
// word (0 when the linear index fits 64 bits).
func blockBase(x *formats.ALTO, e *formats.ALTOMode, b int) uint32 {
	if x.BlockHigh == nil || e.Hi == 0 {
		return 0
	}
	return e.FromHigh(x.BlockHigh[b])
}

func (k *altoMTTKRP) compute(p *MTTKRP, t int, dst []float32, rowBase int) {
	x, ws := k.x, p.ws[t]
	if k.computeFused(p, t, dst, rowBase) {
		return
	}
	var inds [formats.MaxOrder][]uint32
	k.segments(t, func(b, a, c int) {
		for m := range x.Modes {
			e := &x.Modes[m]
			inds[m] = ws.idx[m][:c-a]
			decodeALTO(e, inds[m], x.Lin[a:c], blockBase(x, e, b))
		}
		p.cooChunk(ws, &inds, x.Vals[a:c], dst, rowBase)
	})
}

// altoChunk is one chunk of an order-3 or order-4 ALTO tensor as the
// fused vector loops read it: its linear indices and values, and per mode
// (the output mode first, then the others in increasing order) the PEXT
// mask, the bits the chunk's BLCO block gives it (bases; blco says
// whether there are any) and the factor (facs[0], the output's, unused).
type altoChunk struct {
	lin   []uint64
	vals  []float32
	masks [4]uint64
	bases [4]uint32
	facs  [4][]float32
	blco  bool
}

// computeFused runs part t of an order-3 or order-4 ALTO MTTKRP with the
// index extraction inside the vector loop (altoVec): where every rank
// block is a multiple of 8 wide, the CPU has the instructions, and (order
// 4) runs are short. It reports false, doing nothing, otherwise.
func (k *altoMTTKRP) computeFused(p *MTTKRP, t int, dst []float32, rowBase int) bool {
	x, ws := k.x, p.ws[t]
	N := x.Order()
	c := &ws.alto
	if (N != 3 && N != 4) || p.widths[len(p.widths)-1] < 8 || !altoVec(nil, c, N, 0, 0, 0, 8, p.scatter) {
		return false
	}
	var modes [4]int
	modes[0] = p.mode
	copy(modes[1:], p.others)
	for j, m := range modes[:N] {
		c.masks[j], c.facs[j] = x.Modes[m].Lo, p.fac[m]
	}
	c.blco = x.BlockHigh != nil
	k.segments(t, func(b, a, e int) {
		for j, m := range modes[:N] {
			c.bases[j] = blockBase(x, &x.Modes[m], b)
		}
		c.lin, c.vals = x.Lin[a:e], x.Vals[a:e]
		r0 := 0
		for _, w := range p.widths {
			altoVec(dst, c, N, rowBase, p.ld, r0, w, p.scatter)
			r0 += w
		}
	})
	c.lin, c.vals, c.facs = nil, nil, [4][]float32{}
	return true
}

// decodeALTO sets dst[i] to mode e's index in lin[i] (base holding the
// bits the block's high word gives): with BMI2's PEXT where it is fast,
// otherwise with ALTOMode.Decode's software extraction.
func decodeALTO(e *formats.ALTOMode, dst []uint32, lin []uint64, base uint32) {
	if !pextVec(dst, lin, e.Lo, base) {
		e.Decode(dst, lin, base)
	}
}
