package formats

import (
	"fmt"
	"slices"
)

// FiberMatrix is the mode-n fiber matrix F of a tensor: one row per
// non-empty mode-n fiber (the nonzeros that share every index but the
// mode-n one), one column per mode-n index. SpTTM is the SpMM Y = F·Uᵀ: row
// r of Y is the output fiber at the coordinate FiberInds[.][r].
//
// Rows are ordered by the index of the slicing mode first and then by the
// other fiber modes in increasing mode order, so a slice — the rows that
// share a slicing-mode index, the unit of work the CPU/accelerator mapper
// deals out — is a contiguous row range. Entries within a row are ordered by
// column. For an order-2 tensor the slicing mode is the only other mode, so
// every slice is one row.
//
// F is held in CSR form (RowPtr, ColInd, Vals); the storage formats CSR,
// ELL, HYB and FiberCOO are built from it and give it back exactly.
type FiberMatrix struct {
	Dims       []int      // dims of the tensor
	Mode       int        // the mode contracted by SpTTM: columns are its indices
	SliceMode  int        // rows are grouped into slices by this mode's index
	FiberModes []int      // the modes other than Mode: SliceMode first, then increasing
	FiberInds  [][]uint32 // FiberInds[j][r] is row r's index in mode FiberModes[j]
	RowPtr     []uint32   // row r holds entries RowPtr[r] to RowPtr[r+1]-1
	ColInd     []uint32   // mode-n index of each entry
	Vals       []float32  // value of each entry
	SlicePtr   []uint32   // slice i holds rows SlicePtr[i] to SlicePtr[i+1]-1
}

// NewFiberMatrix builds the mode-n fiber matrix of t with rows grouped by
// the index of sliceMode (0-based modes; they must differ). t is not
// modified.
func NewFiberMatrix(t *COO, mode, sliceMode int) (*FiberMatrix, error) {
	if err := checkFormatInput(t); err != nil {
		return nil, err
	}
	if err := checkModes([]int{mode, sliceMode}, t.Order(), false); err != nil {
		return nil, fmt.Errorf("fiber matrix of mode %d sliced by mode %d: %w", mode+1, sliceMode+1, err)
	}
	f := &FiberMatrix{Dims: slices.Clone(t.Dims), Mode: mode, SliceMode: sliceMode, FiberModes: []int{sliceMode}}
	for m := range t.Order() {
		if m != mode && m != sliceMode {
			f.FiberModes = append(f.FiberModes, m)
		}
	}
	order := append(slices.Clone(f.FiberModes), mode)
	nnz := t.NNZ()
	w := workers(nnz, 1<<15)
	// A tensor sorted by modes 0..N-1 needs sorting by the lead modes
	// only (sortLead; its lead is then always shorter than the order,
	// whose last mode follows the others). If the slicing mode is mode 0
	// as well, the sort moves nonzeros only within each slice, which is
	// contiguous in t: where slices are short enough to stay in cache,
	// gathering through the permutation reads nearby memory
	// (sortedArrays).
	lead := t.sortLead(order)
	near := lead < len(order) && order[0] == 0 && nnz/max(t.Dims[0], 1) <= 1<<15
	// fiber[j] is the index of FiberModes[j] of every nonzero in order:
	// t's own arrays where t is in order.
	var fiber [][]uint32
	if lead == 0 || nnz < 2 {
		fiber = make([][]uint32, len(f.FiberModes))
		for j, m := range f.FiberModes {
			fiber[j] = t.Inds[m]
		}
		f.ColInd = make([]uint32, nnz)
		f.Vals = make([]float32, nnz)
		parallelChunks(nnz, w, func(_, lo, hi int) {
			copy(f.ColInd[lo:hi], t.Inds[mode][lo:hi])
			copy(f.Vals[lo:hi], t.Vals[lo:hi])
		})
	} else {
		var inds [][]uint32
		inds, f.Vals = t.sortedArrays(order, lead, near)
		fiber, f.ColInd = inds[:len(inds)-1], inds[len(inds)-1]
	}

	// Where a row starts (any fiber index changes: 1) or a slice does (the
	// slicing index changes: 2), counted per chunk.
	starts := make([]uint8, nnz)
	rowsIn, slicesIn := make([]int, w+1), make([]int, w+1)
	parallelChunks(nnz, w, func(c, lo, hi int) {
		// Slices hoisted into locals: the stores to starts would otherwise
		// make the compiler reload them on every nonzero.
		slice, rest, out := fiber[0], fiber[1:], starts[lo:hi]
		var next []uint32 // the one other fiber mode of an order-3 tensor
		if len(rest) == 1 {
			next, rest = rest[0], nil
		}
		rows, sls := 0, 0
		for i := range out {
			k := lo + i
			var st uint8
			if k == 0 || slice[k] != slice[k-1] {
				st = 2
				sls++
			} else if next != nil && next[k] != next[k-1] {
				st = 1
			} else {
				for _, ind := range rest {
					if ind[k] != ind[k-1] {
						st = 1
						break
					}
				}
			}
			if st != 0 {
				rows++
			}
			out[i] = st
		}
		rowsIn[c+1], slicesIn[c+1] = rows, sls
	})
	for c := range w {
		rowsIn[c+1] += rowsIn[c]
		slicesIn[c+1] += slicesIn[c]
	}
	rows, numSlices := rowsIn[w], slicesIn[w]

	// Second pass: each chunk writes where its rows start and its slices'
	// first rows, from its offsets.
	f.RowPtr = make([]uint32, rows+1)
	f.SlicePtr = make([]uint32, numSlices+1)
	f.FiberInds = make([][]uint32, len(fiber))
	for j := range fiber {
		f.FiberInds[j] = make([]uint32, rows)
	}
	parallelChunks(nnz, w, func(c, lo, hi int) {
		r, sl := rowsIn[c], slicesIn[c]
		rowPtr, slicePtr, in := f.RowPtr, f.SlicePtr, starts[lo:hi]
		for i, st := range in {
			if st == 0 {
				continue
			}
			k := lo + i
			if st == 2 {
				slicePtr[sl] = uint32(r)
				sl++
			}
			rowPtr[r] = uint32(k)
			r++
		}
	})
	// The rows' coordinates, one mode at a time.
	for j, ind := range fiber {
		out, rowPtr := f.FiberInds[j], f.RowPtr
		parallelChunks(rows, workers(rows, 1<<15), func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				out[r] = ind[rowPtr[r]]
			}
		})
	}
	f.RowPtr[rows] = uint32(nnz)
	f.SlicePtr[numSlices] = uint32(rows)
	return f, nil
}

// Rows returns the number of fiber rows.
func (f *FiberMatrix) Rows() int { return len(f.RowPtr) - 1 }

// Cols returns the number of columns, the dim of Mode.
func (f *FiberMatrix) Cols() int { return f.Dims[f.Mode] }

// NNZ returns the number of entries.
func (f *FiberMatrix) NNZ() int { return len(f.Vals) }

// NumSlices returns the number of non-empty slices.
func (f *FiberMatrix) NumSlices() int { return len(f.SlicePtr) - 1 }

// RowLen returns the number of entries of row r.
func (f *FiberMatrix) RowLen(r int) int { return int(f.RowPtr[r+1] - f.RowPtr[r]) }

// FiberBytes returns the bytes of the fiber coordinates, which every format
// of F needs beside its own arrays to write the SpTTM output.
func (f *FiberMatrix) FiberBytes() int64 {
	return 4 * int64(len(f.FiberModes)) * int64(f.Rows())
}

// Slice is one slice of a fiber matrix: the rows whose slicing-mode index is
// Index.
type Slice struct {
	Index    uint32 // index of the slicing mode (0-based)
	RowStart int    // first row
	RowEnd   int    // one past the last row
	NNZ      int    // entries in the slice
}

// Slices returns the non-empty slices in row order.
func (f *FiberMatrix) Slices() []Slice {
	s := make([]Slice, f.NumSlices())
	for i := range s {
		r0, r1 := int(f.SlicePtr[i]), int(f.SlicePtr[i+1])
		s[i] = Slice{Index: f.FiberInds[0][r0], RowStart: r0, RowEnd: r1, NNZ: int(f.RowPtr[r1] - f.RowPtr[r0])}
	}
	return s
}

// SelectSlices returns the fiber matrix made of the slices with the given
// positions (indexes into Slices(), each at most once), in that order. The
// CPU/accelerator mapper deals slices largest first, so a device's share is
// in general not a contiguous range.
func (f *FiberMatrix) SelectSlices(ids []int) (*FiberMatrix, error) {
	seen := make([]bool, f.NumSlices())
	rows, nnz := 0, 0
	for _, i := range ids {
		if i < 0 || i >= len(seen) {
			return nil, fmt.Errorf("slice %d out of range 0 to %d", i, len(seen)-1)
		}
		if seen[i] {
			return nil, fmt.Errorf("slice %d selected twice", i)
		}
		seen[i] = true
		r0, r1 := f.SlicePtr[i], f.SlicePtr[i+1]
		rows += int(r1 - r0)
		nnz += int(f.RowPtr[r1] - f.RowPtr[r0])
	}
	g := &FiberMatrix{
		Dims: f.Dims, Mode: f.Mode, SliceMode: f.SliceMode, FiberModes: f.FiberModes,
		FiberInds: make([][]uint32, len(f.FiberInds)),
		RowPtr:    make([]uint32, 0, rows+1), ColInd: make([]uint32, 0, nnz), Vals: make([]float32, 0, nnz),
		SlicePtr: make([]uint32, 0, len(ids)+1),
	}
	for j := range g.FiberInds {
		g.FiberInds[j] = make([]uint32, 0, rows)
	}
	for _, i := range ids {
		r0, r1 := f.SlicePtr[i], f.SlicePtr[i+1]
		g.SlicePtr = append(g.SlicePtr, uint32(len(g.RowPtr)))
		for j := range g.FiberInds {
			g.FiberInds[j] = append(g.FiberInds[j], f.FiberInds[j][r0:r1]...)
		}
		e0, e1 := f.RowPtr[r0], f.RowPtr[r1]
		base := uint32(len(g.ColInd))
		for r := r0; r < r1; r++ {
			g.RowPtr = append(g.RowPtr, f.RowPtr[r]-e0+base)
		}
		g.ColInd = append(g.ColInd, f.ColInd[e0:e1]...)
		g.Vals = append(g.Vals, f.Vals[e0:e1]...)
	}
	g.RowPtr = append(g.RowPtr, uint32(len(g.ColInd)))
	g.SlicePtr = append(g.SlicePtr, uint32(rows))
	if len(ids) == 0 {
		g.SlicePtr = g.SlicePtr[1:]
	}
	return g, nil
}

// Tensor returns the tensor F holds, nonzeros in F's row and column order.
func (f *FiberMatrix) Tensor() *COO {
	nnz := f.NNZ()
	t := &COO{Dims: slices.Clone(f.Dims), Inds: make([][]uint32, len(f.Dims)), Vals: slices.Clone(f.Vals)}
	t.Inds[f.Mode] = slices.Clone(f.ColInd)
	for j, m := range f.FiberModes {
		ind := make([]uint32, nnz)
		for r := range f.Rows() {
			v := f.FiberInds[j][r]
			for k := f.RowPtr[r]; k < f.RowPtr[r+1]; k++ {
				ind[k] = v
			}
		}
		t.Inds[m] = ind
	}
	return t
}

// Equal reports whether f and g hold the same rows, slices and entries,
// values compared bit for bit.
func (f *FiberMatrix) Equal(g *FiberMatrix) bool {
	if f.Mode != g.Mode || f.SliceMode != g.SliceMode || !slices.Equal(f.Dims, g.Dims) ||
		!slices.Equal(f.RowPtr, g.RowPtr) || !slices.Equal(f.ColInd, g.ColInd) ||
		!slices.Equal(f.SlicePtr, g.SlicePtr) || len(f.FiberInds) != len(g.FiberInds) {
		return false
	}
	for j := range f.FiberInds {
		if !slices.Equal(f.FiberInds[j], g.FiberInds[j]) {
			return false
		}
	}
	return (&COO{Vals: f.Vals}).Equal(&COO{Vals: g.Vals})
}
