package formats

import "slices"

// The storage formats of a fiber matrix F that the SpTTM kernels run on.
// Each keeps a pointer to the FiberMatrix it was built from: the fiber
// coordinates (which output row each fiber row writes) and the slices are
// shared, not copied, and every format gives F back exactly through its
// FiberMatrix method. CSR is F's own arrays, and FiberCOO shares F's
// columns and values: a plan's conversion of a whole fiber matrix then
// copies nothing, where three copies of its arrays cost more than the
// kernel at 10^6 nonzeros in a one-shot run (page faults on fresh memory).
// Nothing in this package changes a FiberMatrix once built; a caller that
// changes F's arrays changes those formats with them. Bytes counts the
// arrays a format needs besides the fiber coordinates, shared or not; the
// fiber coordinates, the same for every format, are FiberMatrix.FiberBytes.

// FiberCOO is F as (row, column, value) triples in row-major order.
type FiberCOO struct {
	Source *FiberMatrix
	RowInd []uint32
	ColInd []uint32
	Vals   []float32
}

// NewFiberCOO returns F in coordinate format.
func NewFiberCOO(f *FiberMatrix) *FiberCOO {
	x := &FiberCOO{Source: f, RowInd: make([]uint32, f.NNZ()), ColInd: f.ColInd, Vals: f.Vals}
	parallelChunks(f.Rows(), workers(f.Rows(), 1<<14), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			for k := f.RowPtr[r]; k < f.RowPtr[r+1]; k++ {
				x.RowInd[k] = uint32(r)
			}
		}
	})
	return x
}

// Bytes returns the bytes of the triples.
func (x *FiberCOO) Bytes() int64 { return 12 * int64(len(x.Vals)) }

// PaddingRatio is 0: COO stores no padding.
func (x *FiberCOO) PaddingRatio() float64 { return 0 }

// FiberMatrix rebuilds F from the triples.
func (x *FiberCOO) FiberMatrix() *FiberMatrix {
	g := x.Source.withEntries(slices.Clone(x.ColInd), slices.Clone(x.Vals))
	g.RowPtr = make([]uint32, x.Source.Rows()+1)
	for _, r := range x.RowInd {
		g.RowPtr[r+1]++
	}
	for r := range x.Source.Rows() {
		g.RowPtr[r+1] += g.RowPtr[r]
	}
	return g
}

// CSR is F in compressed sparse row format. Row pointers are uint32:
// sparsetune caps nonzeros at 2^32-1, and half-width pointers halve the
// bytes a kernel reads for them.
type CSR struct {
	Source *FiberMatrix
	RowPtr []uint32
	ColInd []uint32
	Vals   []float32
}

// NewCSR returns F in CSR format: F's own arrays, not copies.
func NewCSR(f *FiberMatrix) *CSR {
	return &CSR{Source: f, RowPtr: f.RowPtr, ColInd: f.ColInd, Vals: f.Vals}
}

// Bytes returns the bytes of the row pointers, columns and values.
func (x *CSR) Bytes() int64 { return 4*int64(len(x.RowPtr)) + 8*int64(len(x.Vals)) }

// PaddingRatio is 0: CSR stores no padding.
func (x *CSR) PaddingRatio() float64 { return 0 }

// FiberMatrix rebuilds F from the CSR arrays.
func (x *CSR) FiberMatrix() *FiberMatrix {
	g := x.Source.withEntries(slices.Clone(x.ColInd), slices.Clone(x.Vals))
	g.RowPtr = slices.Clone(x.RowPtr)
	return g
}

// ELL is F padded to Width entries per row, stored slot-major: entry k of
// row r is at k*Rows + r, so that consecutive rows' k-th entries are
// adjacent, as a GPU thread-per-row kernel wants them. A padding slot holds
// the row's last column and the value 0: a kernel multiplies it in without
// a branch and reads a factor row it has just read. Row lengths, which tell
// padding from an explicit zero, are the source's.
type ELL struct {
	Source *FiberMatrix
	Rows   int
	Width  int
	ColInd []uint32 // Rows*Width, slot-major
	Vals   []float32
}

// NewELL returns F in ELL format of width the longest row.
func NewELL(f *FiberMatrix) *ELL {
	width := 0
	for r := range f.Rows() {
		width = max(width, f.RowLen(r))
	}
	return newELL(f, width)
}

// newELL returns the first width entries of every row in ELL format.
func newELL(f *FiberMatrix, width int) *ELL {
	rows := f.Rows()
	x := &ELL{Source: f, Rows: rows, Width: width, ColInd: make([]uint32, rows*width), Vals: make([]float32, rows*width)}
	parallelChunks(rows, workers(rows, 1<<14), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			start, n := int(f.RowPtr[r]), min(f.RowLen(r), width)
			last := f.ColInd[f.RowPtr[r+1]-1]
			for k := range width {
				if k < n {
					x.ColInd[k*rows+r] = f.ColInd[start+k]
					x.Vals[k*rows+r] = f.Vals[start+k]
				} else {
					x.ColInd[k*rows+r] = last
				}
			}
		}
	})
	return x
}

// Bytes returns the bytes of the padded column and value arrays.
func (x *ELL) Bytes() int64 { return 8 * int64(len(x.Vals)) }

// PaddingRatio returns the fraction of slots that are padding.
func (x *ELL) PaddingRatio() float64 {
	slots := len(x.Vals)
	if slots == 0 {
		return 0
	}
	stored := 0
	for r := range x.Rows {
		stored += min(x.Source.RowLen(r), x.Width)
	}
	return float64(slots-stored) / float64(slots)
}

// FiberMatrix rebuilds F from the padded arrays.
func (x *ELL) FiberMatrix() *FiberMatrix {
	return x.Source.withEntries(nil, nil).appendELL(x, nil)
}

// appendELL fills g's entries row by row from the ELL part of x and then,
// when rest is not nil, the row's remaining entries from rest (a HYB's COO
// part, in row order).
func (g *FiberMatrix) appendELL(x *ELL, rest *FiberCOO) *FiberMatrix {
	src := x.Source
	g.RowPtr = make([]uint32, 1, src.Rows()+1)
	g.ColInd = make([]uint32, 0, src.NNZ())
	g.Vals = make([]float32, 0, src.NNZ())
	k := 0
	for r := range src.Rows() {
		n := min(src.RowLen(r), x.Width)
		for s := range n {
			g.ColInd = append(g.ColInd, x.ColInd[s*x.Rows+r])
			g.Vals = append(g.Vals, x.Vals[s*x.Rows+r])
		}
		for rest != nil && k < len(rest.RowInd) && int(rest.RowInd[k]) == r {
			g.ColInd = append(g.ColInd, rest.ColInd[k])
			g.Vals = append(g.Vals, rest.Vals[k])
			k++
		}
		g.RowPtr = append(g.RowPtr, uint32(len(g.ColInd)))
	}
	return g
}

// HYB is F split into an ELL part holding the first Width entries of each
// row and a COO part holding the rest, in row order.
//
// The default width minimises bytes. An ELL slot costs 8 bytes (column and
// value) and a COO entry 12 (row, column, value), so widening the ELL part
// from K to K+1 adds 8·Rows bytes and saves 12 bytes for each row longer
// than K: it pays while more than 2/3 of the rows are longer than K. The
// width is therefore the smallest K such that at most 2/3 of the rows have
// more than K entries — the row-length distribution's 1/3 quantile — found
// from a histogram of row lengths in O(Rows + longest row).
type HYB struct {
	ELL *ELL
	COO *FiberCOO
}

// HYBWidth returns the default ELL width of a HYB of f.
func HYBWidth(f *FiberMatrix) int {
	rows := f.Rows()
	longest := 0
	for r := range rows {
		longest = max(longest, f.RowLen(r))
	}
	hist := make([]int, longest+1)
	for r := range rows {
		hist[f.RowLen(r)]++
	}
	return HYBWidthOfHistogram(hist)
}

// HYBWidthOfHistogram is HYBWidth for rows given by their length
// histogram: hist[k] rows have k entries.
func HYBWidthOfHistogram(hist []int) int {
	rows := 0
	for _, h := range hist {
		rows += h
	}
	longer := rows // rows with more than k entries
	for k, h := range hist {
		longer -= h
		if 3*longer <= 2*rows {
			return k
		}
	}
	return max(len(hist)-1, 0)
}

// NewHYB returns F in HYB format with an ELL part of the given width, or
// of HYBWidth(f) when width < 0.
func NewHYB(f *FiberMatrix, width int) *HYB {
	if width < 0 {
		width = HYBWidth(f)
	}
	coo := &FiberCOO{Source: f}
	for r := range f.Rows() {
		for k := int(f.RowPtr[r]) + width; k < int(f.RowPtr[r+1]); k++ {
			coo.RowInd = append(coo.RowInd, uint32(r))
			coo.ColInd = append(coo.ColInd, f.ColInd[k])
			coo.Vals = append(coo.Vals, f.Vals[k])
		}
	}
	return &HYB{ELL: newELL(f, width), COO: coo}
}

// Bytes returns the bytes of both parts.
func (x *HYB) Bytes() int64 { return x.ELL.Bytes() + x.COO.Bytes() }

// PaddingRatio returns the padding slots of the ELL part over all stored
// slots (ELL slots plus COO entries).
func (x *HYB) PaddingRatio() float64 {
	slots := len(x.ELL.Vals) + len(x.COO.Vals)
	if slots == 0 {
		return 0
	}
	return x.ELL.PaddingRatio() * float64(len(x.ELL.Vals)) / float64(slots)
}

// FiberMatrix rebuilds F from both parts.
func (x *HYB) FiberMatrix() *FiberMatrix {
	return x.ELL.Source.withEntries(nil, nil).appendELL(x.ELL, x.COO)
}

// withEntries returns a FiberMatrix sharing f's fibers and slices with the
// given entries; the caller sets RowPtr.
func (f *FiberMatrix) withEntries(col []uint32, vals []float32) *FiberMatrix {
	return &FiberMatrix{Dims: f.Dims, Mode: f.Mode, SliceMode: f.SliceMode, FiberModes: f.FiberModes,
		FiberInds: f.FiberInds, SlicePtr: f.SlicePtr, ColInd: col, Vals: vals}
}
