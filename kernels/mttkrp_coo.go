package kernels

import (
	"fmt"

	"github.com/sparsetune/sparsetune/formats"
)

// cooMTTKRP is the COO kernel: part t owns nonzeros [start[t], start[t+1]).
type cooMTTKRP struct {
	x     *formats.COO
	start []int
}

// NewCOOMTTKRP builds the MTTKRP plan of a COO tensor for a 0-based mode
// and rank, using threads goroutines (0 for GOMAXPROCS).
//
// Parallel strategy: the nonzeros are cut into equal contiguous parts, each
// split point moved forward to where the output-mode index changes. A part
// whose output rows overlap no earlier part's rows writes the output
// directly (owner-computes: a COO sorted by the output mode needs no copy),
// any other part accumulates into a private copy of the rows it touches,
// and a second parallel phase, split by rows, adds the copies into the
// output. So there are no locks or atomics; an unsorted tensor costs one
// extra copy of the output rows per part beyond the first.
func NewCOOMTTKRP(x *formats.COO, mode, rank, threads int) (*MTTKRP, error) {
	if err := formats.CheckDims(x.Dims); err != nil {
		return nil, err
	}
	if err := checkCOO(x); err != nil {
		return nil, fmt.Errorf("mttkrp coo: %w", err)
	}
	p, err := newPlan("coo", x.Dims, x.NNZ(), mode, rank, threads)
	if err != nil {
		return nil, err
	}
	p.xbytes = x.Bytes()
	n := x.NNZ()
	out := x.Inds[mode]
	k := &cooMTTKRP{x: x, start: make([]int, p.parts+1)}
	lo, hi := make([]int, p.parts), make([]int, p.parts)
	for t := 1; t <= p.parts; t++ {
		s := max(t*n/p.parts, k.start[t-1])
		for s < n && s > 0 && out[s] == out[s-1] {
			s++
		}
		k.start[t] = s
	}
	k.start[p.parts] = n
	for t := range p.parts {
		lo[t], hi[t] = rowSpan(out[k.start[t]:k.start[t+1]])
	}
	p.scatter = shortRuns(runChanges(out), n)
	p.kernel = k
	p.placeRows(lo, hi)
	return p, nil
}

// rowSpan returns the smallest interval [lo, hi) holding every index in
// ind ([0, 0) if ind is empty).
func rowSpan(ind []uint32) (lo, hi int) {
	if len(ind) == 0 {
		return 0, 0
	}
	mn, mx := ind[0], ind[0]
	for _, i := range ind {
		mn = min(mn, i)
		mx = max(mx, i)
	}
	return int(mn), int(mx) + 1
}

func (k *cooMTTKRP) compute(p *MTTKRP, t int, dst []float32, rowBase int) {
	ws := p.ws[t]
	var inds [formats.MaxOrder][]uint32
	// Chunks keep one chunk's indices in cache across the rank blocks.
	for a := k.start[t]; a < k.start[t+1]; a += chunkNNZ {
		b := min(a+chunkNNZ, k.start[t+1])
		for m, ind := range k.x.Inds {
			inds[m] = ind[a:b]
		}
		p.cooChunk(ws, &inds, k.x.Vals[a:b], dst, rowBase)
	}
}
