package formats

import (
	"fmt"
	"slices"

	"github.com/sparsetune/sparsetune/internal/par"
)

// CSF is a tensor in compressed sparse fiber format (Smith and Karypis): a
// forest whose level l holds the distinct indices of mode ModeOrder[l] under
// each fiber of level l-1. The root level (ModeOrder[0]) is the mode an
// MTTKRP writes, so each root fiber owns one output row and root fibers can
// be processed in parallel without conflicts; the levels below let a kernel
// hoist the product of the upper factor rows out of the lower loops (SPLATT).
//
// For an order-N tensor there are N levels. Fiber f of level l < N-1 has
// index FiberIdx[l][f] and its children are fibers FiberPtr[l][f] to
// FiberPtr[l][f+1]-1 of level l+1. The leaf level N-1 has one entry per
// nonzero: FiberIdx[N-1][k] and Vals[k]. Duplicate coordinates are kept as
// separate leaves.
//
// FiberPtr is uint32, not int: its entries count fibers of the next level,
// which never exceed the number of nonzeros (at most MaxNNZ = 2^32-1), and
// halving the pointer arrays halves the bytes a kernel streams for them.
type CSF struct {
	Dims      []int      // dims in the tensor's own mode numbering
	ModeOrder []int      // ModeOrder[l] is the 0-based mode stored at level l; ModeOrder[0] is the root
	FiberPtr  [][]uint32 // N-1 arrays; len(FiberPtr[l]) = fibers at level l + 1, last entry = fibers at level l+1
	FiberIdx  [][]uint32 // N arrays; FiberIdx[l][f] = mode-ModeOrder[l] index of fiber f at level l
	Vals      []float32  // one value per leaf
}

// checkFormatInput reports whether t is consistent enough to be converted to
// a tensor format: dims accepted by CheckDims, one index array per mode,
// arrays of equal length (at most MaxNNZ) and every index below its dim.
// The formats depend on the last point (ALTO would mix an oversized index
// into another mode's bits), so it is checked in parallel, but values are
// not: a NaN round-trips like any other value.
func checkFormatInput(t *COO) error {
	if err := t.checkArrays(); err != nil {
		return err
	}
	n := len(t.Vals)
	// The largest index first (in parallel, without a branch per index);
	// only a mode that fails looks for its first offender.
	for m, ind := range t.Inds {
		dim := uint64(t.Dims[m])
		if n == 0 || uint64(par.MaxUint32(ind)) < dim {
			continue
		}
		k := slices.IndexFunc(ind, func(i uint32) bool { return uint64(i) >= dim })
		return fmt.Errorf("nonzero %d: mode %d index %d (1-based) exceeds dim %d", k, m+1, uint64(ind[k])+1, dim)
	}
	return nil
}

// NewCSF builds the CSF of t with levels in modeOrder, a permutation of t's
// modes whose first entry is the root. t is not modified: its nonzeros are
// sorted (COO.sortedArrays: a parallel radix sort), the sorted indices of
// each level are laid out once, and the two passes that build the tree
// (count the fibers, then fill the levels) read them sequentially in
// parallel chunks.
func NewCSF(t *COO, modeOrder []int) (*CSF, error) {
	if err := checkFormatInput(t); err != nil {
		return nil, fmt.Errorf("csf: %w", err)
	}
	if err := checkModes(modeOrder, t.Order(), true); err != nil {
		return nil, fmt.Errorf("csf: %w", err)
	}
	N, n := t.Order(), t.NNZ()
	inds, vals := t.sortedArrays(modeOrder, t.sortLead(modeOrder), false)

	// Pass 1: the first level at which nonzero k differs from k-1 (N-1 when
	// only the leaf differs or it is a duplicate); a fiber starts at every
	// level from there down.
	w := workers(n, 1<<15)
	firstLevel := make([]uint8, n)
	counts := make([][MaxOrder]int, w)
	parallelChunks(n, w, func(c, lo, hi int) {
		cnt := &counts[c]
		for k := lo; k < hi; k++ {
			d := 0
			if k > 0 {
				for d < N-1 && inds[d][k-1] == inds[d][k] {
					d++
				}
			}
			firstLevel[k] = uint8(d)
			for l := d; l < N-1; l++ {
				cnt[l]++
			}
		}
	})
	var fibers [MaxOrder]int
	for c := range counts { // exclusive prefix sums: chunk c's first fiber ids
		for l := range N - 1 {
			v := counts[c][l]
			counts[c][l] = fibers[l]
			fibers[l] += v
		}
	}

	x := &CSF{
		Dims:      slices.Clone(t.Dims),
		ModeOrder: slices.Clone(modeOrder),
		FiberPtr:  make([][]uint32, N-1),
		FiberIdx:  make([][]uint32, N),
		Vals:      vals,
	}
	x.FiberIdx[N-1] = inds[N-1] // the sorted leaf indices are the leaf level
	for l := range N - 1 {
		x.FiberIdx[l] = make([]uint32, fibers[l])
		x.FiberPtr[l] = make([]uint32, fibers[l]+1)
		if l < N-2 {
			x.FiberPtr[l][fibers[l]] = uint32(fibers[l+1])
		} else {
			x.FiberPtr[l][fibers[l]] = uint32(n)
		}
	}

	// Pass 2: fill. A fiber starting at level l at nonzero k has as first
	// child the fiber that starts at level l+1 at the same nonzero, whose id
	// is the next id of level l+1.
	parallelChunks(n, w, func(c, lo, hi int) {
		next := counts[c]
		for k := lo; k < hi; k++ {
			next[N-1] = k
			for l := int(firstLevel[k]); l < N-1; l++ {
				f := next[l]
				x.FiberIdx[l][f] = inds[l][k]
				x.FiberPtr[l][f] = uint32(next[l+1])
				next[l] = f + 1
			}
		}
	})
	return x, nil
}

// Order returns the number of modes (and of levels).
func (x *CSF) Order() int { return len(x.Dims) }

// NNZ returns the number of leaves, duplicates included.
func (x *CSF) NNZ() int { return len(x.Vals) }

// Root returns the mode stored at the root level.
func (x *CSF) Root() int { return x.ModeOrder[0] }

// NumFibers returns the number of fibers at level l; the leaf level has one
// per nonzero.
func (x *CSF) NumFibers(l int) int { return len(x.FiberIdx[l]) }

// LeafStarts returns, for level l < N-1, the first leaf (nonzero) under
// each fiber of level l, with a final entry NNZ: fiber f spans nonzeros
// LeafStarts(l)[f] to LeafStarts(l)[f+1]-1. Kernels use it on the root level
// to split root fibers among threads by nonzeros rather than by fibers.
func (x *CSF) LeafStarts(l int) []uint32 {
	N := x.Order()
	s := slices.Clone(x.FiberPtr[N-2])
	for up := N - 3; up >= l; up-- {
		ptr := x.FiberPtr[up]
		t := make([]uint32, len(ptr))
		parallelChunks(len(ptr), workers(len(ptr), 1<<15), func(_, lo, hi int) {
			for f := lo; f < hi; f++ {
				t[f] = s[ptr[f]]
			}
		})
		s = t
	}
	return s
}

// ToCOO returns the tensor x stores, in x's order: sorted by ModeOrder, with
// modes in the tensor's own numbering.
func (x *CSF) ToCOO() *COO {
	N, n := x.Order(), x.NNZ()
	t := &COO{Dims: slices.Clone(x.Dims), Inds: make([][]uint32, N), Vals: slices.Clone(x.Vals)}
	t.Inds[x.ModeOrder[N-1]] = slices.Clone(x.FiberIdx[N-1])
	for l := range N - 1 {
		out := make([]uint32, n)
		starts := x.LeafStarts(l)
		idx := x.FiberIdx[l]
		nf := len(idx)
		parallelChunks(nf, workers(nf, 1<<12), func(_, lo, hi int) {
			for f := lo; f < hi; f++ {
				v := idx[f]
				seg := out[starts[f]:starts[f+1]]
				for k := range seg {
					seg[k] = v
				}
			}
		})
		t.Inds[x.ModeOrder[l]] = out
	}
	return t
}

// Bytes returns the bytes of x's pointer, index and value arrays.
func (x *CSF) Bytes() int64 {
	b := int64(4 * len(x.Vals))
	for _, p := range x.FiberPtr {
		b += int64(4 * len(p))
	}
	for _, i := range x.FiberIdx {
		b += int64(4 * len(i))
	}
	return b
}

// BytesPerNNZ returns Bytes divided by the number of nonzeros (0 if none).
func (x *CSF) BytesPerNNZ() float64 { return bytesPerNNZ(x.Bytes(), x.NNZ()) }

func bytesPerNNZ(b int64, nnz int) float64 {
	if nnz == 0 {
		return 0
	}
	return float64(b) / float64(nnz)
}
