package kernels

import (
	"fmt"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/par"
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
	// One pass over each part's output indices, the parts in parallel:
	// a one-run MTTKRP (engine) builds this plan on a tensor of millions
	// of nonzeros for a single run.
	changes := make([]int, p.parts)
	par.Range(p.parts, p.parts, func(t, _, _ int) {
		a, b := k.start[t], k.start[t+1]
		lo[t], hi[t], changes[t] = rowSpanChanges(out[a:b])
		if a > 0 && a < b && out[a] != out[a-1] {
			changes[t]++
		}
	})
	total := 0
	for _, c := range changes {
		total += c
	}
	p.scatter = shortRuns(total, n)
	p.kernel = k
	p.placeRows(lo, hi)
	return p, nil
}

// COOPrivateBytes returns the most memory NewCOOMTTKRP holds in private
// output copies for nnz nonzeros in no particular order along a mode of
// rows indices, at rank R on threads goroutines (0 for GOMAXPROCS): one
// copy of the output per part beyond the first. A COO sorted by the mode
// holds none.
func COOPrivateBytes(nnz, rows, rank, threads int) int64 {
	return 4 * int64(partsFor(nnz, threads)-1) * int64(rows) * int64(padRank(rank))
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
