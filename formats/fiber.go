package formats

import (
	"fmt"
	"sort"
)

// This file adds to the fiber matrix (fibermatrix.go) what the CPU/accelerator
// split and the SpTTM kernels need around it: row-range views, the choice of
// a storage format by name, sizes known before building, and work splits
// balanced by nonzeros.

// SubMatrix returns the fiber matrix of rows rowStart to rowEnd-1 of f. A
// range that cuts a slice keeps the cut part as a slice of its own, so the
// CPU and the accelerator can share one long slice.
//
// The view shares FiberInds, ColInd and Vals with f (capped, so appending to
// the view never writes into f) and copies only the rebased row pointers:
// building it costs O(rows of the range), not O(entries). Contiguous slice
// ranges thus cost less than SelectSlices, which copies everything.
func (f *FiberMatrix) SubMatrix(rowStart, rowEnd int) (*FiberMatrix, error) {
	if rowStart < 0 || rowEnd < rowStart || rowEnd > f.Rows() {
		return nil, fmt.Errorf("row range %d to %d outside 0 to %d", rowStart, rowEnd, f.Rows())
	}
	rows := rowEnd - rowStart
	e0, e1 := f.RowPtr[rowStart], f.RowPtr[rowEnd]
	g := &FiberMatrix{
		Dims: f.Dims, Mode: f.Mode, SliceMode: f.SliceMode, FiberModes: f.FiberModes,
		FiberInds: make([][]uint32, len(f.FiberInds)),
		RowPtr:    make([]uint32, rows+1),
		ColInd:    f.ColInd[e0:e1:e1],
		Vals:      f.Vals[e0:e1:e1],
	}
	for j, ind := range f.FiberInds {
		g.FiberInds[j] = ind[rowStart:rowEnd:rowEnd]
	}
	src := f.RowPtr[rowStart : rowEnd+1]
	parallelChunks(rows+1, workers(rows+1, 1<<16), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			g.RowPtr[r] = src[r] - e0
		}
	})
	// The slice starts strictly inside the range stay slice starts.
	lo := sort.Search(len(f.SlicePtr), func(i int) bool { return int(f.SlicePtr[i]) > rowStart })
	hi := sort.Search(len(f.SlicePtr), func(i int) bool { return int(f.SlicePtr[i]) >= rowEnd })
	g.SlicePtr = make([]uint32, 0, max(hi-lo, 0)+2)
	g.SlicePtr = append(g.SlicePtr, 0)
	for _, p := range f.SlicePtr[lo:max(hi, lo)] {
		g.SlicePtr = append(g.SlicePtr, p-uint32(rowStart))
	}
	if rows > 0 {
		g.SlicePtr = append(g.SlicePtr, uint32(rows))
	}
	return g, nil
}

// MaxRowLen returns the number of entries of the longest row: the width of
// f's ELL format.
func (f *FiberMatrix) MaxRowLen() int {
	rows := f.Rows()
	w := workers(rows, 1<<16)
	longest := make([]uint32, w)
	parallelChunks(rows, w, func(c, lo, hi int) {
		m := uint32(0)
		for r := lo; r < hi; r++ {
			m = max(m, f.RowPtr[r+1]-f.RowPtr[r])
		}
		longest[c] = m
	})
	m := uint32(0)
	for _, l := range longest {
		m = max(m, l)
	}
	return int(m)
}

// RowSplits returns parts+1 row boundaries, from 0 to Rows(), that cut f
// into parts contiguous row ranges of about equal SpTTM work, for a kernel
// in which each goroutine owns its rows of Y (no locks, no reduction).
//
// The work of rows 0 to r-1 is counted as entries plus rows, RowPtr[r] + r:
// every entry costs one FMA sweep over the rank, and every row one sweep to
// write its output row, which matters where fibers are short (a fiber
// matrix often has nearly as many rows as entries). A row is never cut, so a
// single row longer than the share of one part leaves that part heavier;
// ranges may be empty when parts exceeds the rows.
func (f *FiberMatrix) RowSplits(parts int) []int {
	parts = max(parts, 1)
	rows := f.Rows()
	total := int64(f.NNZ()) + int64(rows)
	splits := make([]int, parts+1)
	for p := 1; p < parts; p++ {
		target := total * int64(p) / int64(parts)
		// The first row boundary whose work before it reaches the target.
		splits[p] = sort.Search(rows, func(r int) bool { return int64(f.RowPtr[r])+int64(r) >= target })
	}
	splits[parts] = rows
	return splits
}

// FiberFormat is a storage format of a fiber matrix: FiberCOO, CSR, ELL or
// HYB. Each gives back the fiber matrix it was built from exactly.
type FiberFormat interface {
	// Bytes returns the bytes of the format's own arrays; the fiber
	// coordinates, the same for every format, are FiberMatrix.FiberBytes.
	Bytes() int64
	// PaddingRatio returns padding slots over stored slots.
	PaddingRatio() float64
	// FiberMatrix rebuilds the fiber matrix.
	FiberMatrix() *FiberMatrix
}

// FiberFormatNames lists the fiber-matrix formats by the names
// NewFiberFormat takes, the names sparsetune info prints.
var FiberFormatNames = []string{"fiber-coo", "csr", "ell", "hyb"}

// canonicalFiberFormat returns the canonical name of a fiber format; "coo"
// is accepted for "fiber-coo" because among SpTTM formats it is not
// ambiguous.
func canonicalFiberFormat(name string) (string, error) {
	switch name {
	case "coo", "fiber-coo":
		return "fiber-coo", nil
	case "csr", "ell", "hyb":
		return name, nil
	}
	return "", fmt.Errorf("unknown fiber-matrix format %q, expected one of %v", name, FiberFormatNames)
}

// NewFiberFormat returns f in the named format (one of FiberFormatNames, or
// "coo" for "fiber-coo"; HYB gets its default width). ELL allocates
// Rows()·MaxRowLen() slots, which one long fiber can make huge: check
// FiberFormatBytes first where memory is bounded.
func NewFiberFormat(f *FiberMatrix, name string) (FiberFormat, error) {
	name, err := canonicalFiberFormat(name)
	if err != nil {
		return nil, err
	}
	switch name {
	case "fiber-coo":
		return NewFiberCOO(f), nil
	case "csr":
		return NewCSR(f), nil
	case "ell":
		return NewELL(f), nil
	default:
		return NewHYB(f, -1), nil
	}
}

// ConvertSlices returns the slices with the given positions in Slices()
// (each at most once, in that order) in the named format: one device's share
// of the work, ready to run.
func (f *FiberMatrix) ConvertSlices(ids []int, name string) (FiberFormat, error) {
	if _, err := canonicalFiberFormat(name); err != nil {
		return nil, err
	}
	g, err := f.SelectSlices(ids)
	if err != nil {
		return nil, err
	}
	return NewFiberFormat(g, name)
}

// FiberFormatBytes returns what Bytes of f in the named format would be,
// without building it: the mapper needs to know whether a share fits in a
// device's memory before converting it, and ELL can be orders of magnitude
// larger than the tensor. It takes O(Rows()) time and, for HYB, a histogram
// of row lengths.
func FiberFormatBytes(f *FiberMatrix, name string) (int64, error) {
	name, err := canonicalFiberFormat(name)
	if err != nil {
		return 0, err
	}
	rows, nnz := int64(f.Rows()), int64(f.NNZ())
	switch name {
	case "fiber-coo":
		return 12 * nnz, nil
	case "csr":
		return 4*(rows+1) + 8*nnz, nil
	case "ell":
		return 8 * rows * int64(f.MaxRowLen()), nil
	}
	width := HYBWidth(f)
	rest := int64(0)
	for r := range f.Rows() {
		rest += int64(max(f.RowLen(r)-width, 0))
	}
	return 8*rows*int64(width) + 12*rest, nil
}
