package formats

import (
	"slices"
	"time"

	"github.com/sparsetune/sparsetune/internal/warm"
)

// Picks holds the indices of some of a tensor's nonzeros, read by a reader
// while it passed over the tensor's arrays anyway (ReadFilePicked).
//
// Why: a sample of a large tensor's nonzeros (features.Summarize) reads a
// few thousand scattered indices, and read after the fact each is a cache
// and TLB miss into arrays of many megabytes: in a one-shot process that
// gather was half of a prediction's cost. The reader checks every index
// anyway, a piece at a time, so it picks the sampled ones from each piece
// while the piece is in the cache.
type Picks struct {
	NNZ  int        // the tensor's nonzeros when the picks were made
	Pos  []uint64   // the positions picked, increasing, below NNZ
	Inds [][]uint32 // Inds[m][k] is the mode-m index of nonzero Pos[k]

	// Took is what picking cost: choosing the positions, plus the time
	// spent picking in each of the reader's pieces, summed over the
	// reader's goroutines (they pick concurrently, so it can exceed the
	// wall time it added). The reader's own pass is not in it.
	Took time.Duration
}

// picker makes a Picks as a reader goes. A nil *picker picks nothing.
type picker struct {
	positions func(nnz int) []uint64
	picks     *Picks
	took      []time.Duration // per slot, so that slots pick concurrently
}

// start is called by a reader once it knows the nonzero count and the
// order, before its pass over the index arrays, with the number of slots
// (goroutines) it will pick from. Positions that are not increasing and
// below nnz are refused (no picks), as is an empty set.
func (p *picker) start(nnz, order, slots int) {
	if p == nil || p.positions == nil {
		return
	}
	begin := time.Now()
	pos := p.positions(nnz)
	if len(pos) == 0 || pos[len(pos)-1] >= uint64(nnz) || !slices.IsSorted(pos) {
		return
	}
	n := len(pos)
	flat := warm.Uint32s(order * n) // one allocation, of memory a reader let go of where it can
	picks := &Picks{NNZ: nnz, Pos: pos, Inds: make([][]uint32, order)}
	for m := range order {
		picks.Inds[m] = flat[m*n : (m+1)*n : (m+1)*n]
	}
	p.picks, p.took = picks, make([]time.Duration, max(slots, 1))
	p.took[0] = time.Since(begin)
}

// pick copies the indices of mode m at the picked positions within [lo,
// lo+len(ind)) from ind, which holds mode m's indices from position lo,
// and counts the time in slot. Calls with distinct slots may run
// concurrently if they pick distinct positions or modes.
func (p *picker) pick(slot, m, lo int, ind []uint32) {
	if p == nil || p.picks == nil {
		return
	}
	begin := time.Now()
	pos, out := p.picks.Pos, p.picks.Inds[m]
	k, _ := slices.BinarySearch(pos, uint64(lo))
	for hi := uint64(lo + len(ind)); k < len(pos) && pos[k] < hi; k++ {
		out[k] = ind[pos[k]-uint64(lo)]
	}
	p.took[slot] += time.Since(begin)
}

// done returns the picks, or nil when none were made.
func (p *picker) done() *Picks {
	if p == nil || p.picks == nil {
		return nil
	}
	for _, t := range p.took {
		p.picks.Took += t
	}
	return p.picks
}

// ReadFilePicked is ReadFileSummed that also picks the indices of the
// nonzeros at positions(nnz) as the reader passes over them. positions is
// called once, as soon as the reader knows the number of nonzeros the
// file holds, and returns increasing positions below it.
//
// The picks are nil when the reader does not pick (MatrixMarket), when
// positions returns none, and when duplicates were summed: the positions
// then no longer name the same nonzeros. A caller falls back to reading
// the positions from the tensor.
func ReadFilePicked(path string, positions func(nnz int) []uint64) (*COO, *Picks, int, error) {
	p := &picker{positions: positions}
	t, err := readFile(path, p)
	if err != nil {
		return nil, nil, 0, err
	}
	picks := p.done()
	summed, err := t.SumDuplicates()
	if err != nil {
		return nil, nil, 0, fileError(path, "%v", err)
	}
	if summed > 0 {
		picks = nil
	}
	return t, picks, summed, nil
}
