package kernels

import (
	"fmt"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/par"
)

// The vector inner loops are assembly and do not check bounds, and the Go
// loops check them only per row. So that a malformed format (built by hand
// rather than by package formats) gives an error instead of a memory fault
// or a silently wrong result, every plan constructor checks, once, that the
// format's arrays are consistent and every index is below its dim. It is
// one pass over the arrays, in parallel: small next to building a format,
// and a tenth of a one-run MTTKRP (engine), which builds none.

// checkIndex returns an error naming the first index of ind not below
// bound. It looks for that index only once the largest index
// (par.MaxUint32) says there is one.
func checkIndex(what string, ind []uint32, bound int) error {
	if len(ind) == 0 || uint64(par.MaxUint32(ind)) < uint64(bound) {
		return nil
	}
	b := uint64(bound)
	for k, i := range ind {
		if uint64(i) >= b {
			return fmt.Errorf("%s %d at position %d is out of range (bound %d)", what, i, k, bound)
		}
	}
	panic("unreachable: an index at least the bound was found and then not")
}

// checkPointers checks that ptr (len n+1) is nondecreasing and ends at most
// at limit.
func checkPointers(what string, ptr []uint32, n, limit int) error {
	if len(ptr) != n+1 {
		return fmt.Errorf("%s: %d pointers for %d rows", what, len(ptr), n)
	}
	for i := range n {
		if ptr[i] > ptr[i+1] {
			return fmt.Errorf("%s: pointer %d (%d) is below pointer %d (%d)", what, i+1, ptr[i+1], i, ptr[i])
		}
	}
	if int(ptr[n]) > limit {
		return fmt.Errorf("%s: last pointer %d is past the %d entries", what, ptr[n], limit)
	}
	return nil
}

func checkCSR(x *formats.CSR) error {
	rows, cols := x.Source.Rows(), x.Source.Cols()
	if len(x.Vals) != len(x.ColInd) {
		return fmt.Errorf("%d values for %d column indices", len(x.Vals), len(x.ColInd))
	}
	if err := checkPointers("row pointers", x.RowPtr, rows, len(x.ColInd)); err != nil {
		return err
	}
	return checkIndex("column index", x.ColInd, cols)
}

func checkFiberCOO(x *formats.FiberCOO) error {
	n := len(x.RowInd)
	if len(x.ColInd) != n || len(x.Vals) != n {
		return fmt.Errorf("%d rows, %d columns and %d values", n, len(x.ColInd), len(x.Vals))
	}
	for k := 1; k < n; k++ {
		if x.RowInd[k] < x.RowInd[k-1] {
			return fmt.Errorf("row index %d at position %d is below the previous one: entries must be in row order", x.RowInd[k], k)
		}
	}
	if err := checkIndex("row index", x.RowInd, x.Source.Rows()); err != nil {
		return err
	}
	return checkIndex("column index", x.ColInd, x.Source.Cols())
}

func checkELL(x *formats.ELL) error {
	if x.Rows != x.Source.Rows() || x.Width < 0 || len(x.ColInd) != x.Rows*x.Width || len(x.Vals) != len(x.ColInd) {
		return fmt.Errorf("%d rows of width %d with %d columns and %d values (source: %d rows)", x.Rows, x.Width, len(x.ColInd), len(x.Vals), x.Source.Rows())
	}
	return checkIndex("column index", x.ColInd, x.Source.Cols())
}

func checkCOO(x *formats.COO) error {
	if len(x.Inds) != len(x.Dims) {
		return fmt.Errorf("%d index arrays for %d modes", len(x.Inds), len(x.Dims))
	}
	for m, ind := range x.Inds {
		if len(ind) != len(x.Vals) {
			return fmt.Errorf("mode %d has %d indices for %d values", m+1, len(ind), len(x.Vals))
		}
		if err := checkIndex(fmt.Sprintf("mode-%d index", m+1), ind, x.Dims[m]); err != nil {
			return err
		}
	}
	return nil
}

func checkCSF(x *formats.CSF) error {
	N := len(x.Dims)
	for l := range N {
		m := x.ModeOrder[l]
		if m < 0 || m >= N {
			return fmt.Errorf("level %d holds mode %d of an order-%d tensor", l, m, N)
		}
		if err := checkIndex(fmt.Sprintf("level-%d index", l), x.FiberIdx[l], x.Dims[m]); err != nil {
			return err
		}
		if l < N-1 {
			if err := checkPointers(fmt.Sprintf("level-%d pointers", l), x.FiberPtr[l], len(x.FiberIdx[l]), len(x.FiberIdx[l+1])); err != nil {
				return err
			}
		}
	}
	if len(x.Vals) != len(x.FiberIdx[N-1]) {
		return fmt.Errorf("%d values for %d leaves", len(x.Vals), len(x.FiberIdx[N-1]))
	}
	return nil
}

func checkHiCOO(x *formats.HiCOO) error {
	nb := len(x.BlockPtr) - 1
	if nb < 0 || len(x.BlockInds) != len(x.Dims) || len(x.ElemInds) != len(x.Dims) {
		return fmt.Errorf("malformed HiCOO: %d block pointers, %d block and %d element index arrays for %d modes", len(x.BlockPtr), len(x.BlockInds), len(x.ElemInds), len(x.Dims))
	}
	if err := checkPointers("block pointers", x.BlockPtr, nb, len(x.Vals)); err != nil {
		return err
	}
	for m := range x.Dims {
		if len(x.BlockInds[m]) != nb || len(x.ElemInds[m]) != len(x.Vals) {
			return fmt.Errorf("mode %d: %d block indices for %d blocks, %d offsets for %d values", m+1, len(x.BlockInds[m]), nb, len(x.ElemInds[m]), len(x.Vals))
		}
		for b := range nb {
			base := uint64(x.BlockInds[m][b]) << x.BlockBits
			for _, e := range x.ElemInds[m][x.BlockPtr[b]:x.BlockPtr[b+1]] {
				if base+uint64(e) >= uint64(x.Dims[m]) {
					return fmt.Errorf("mode-%d index %d in block %d is out of range (dim %d)", m+1, base+uint64(e), b, x.Dims[m])
				}
			}
		}
	}
	return nil
}

// checkALTO decodes every mode of every nonzero once, with the kernel's
// own extraction, and checks the indices against the dims.
func checkALTO(x *formats.ALTO) error {
	nb := len(x.BlockPtr) - 1
	if nb < 0 || len(x.Lin) != len(x.Vals) || len(x.Modes) != len(x.Dims) || (x.BlockHigh != nil && len(x.BlockHigh) != nb) {
		return fmt.Errorf("malformed ALTO: %d linear indices, %d values, %d block pointers", len(x.Lin), len(x.Vals), len(x.BlockPtr))
	}
	if err := checkPointers("block pointers", x.BlockPtr, nb, len(x.Vals)); err != nil {
		return err
	}
	buf := make([]uint32, chunkNNZ)
	for b := range nb {
		for a := int(x.BlockPtr[b]); a < int(x.BlockPtr[b+1]); a += chunkNNZ {
			c := min(a+chunkNNZ, int(x.BlockPtr[b+1]))
			for m := range x.Modes {
				e := &x.Modes[m]
				decodeALTO(e, buf[:c-a], x.Lin[a:c], blockBase(x, e, b))
				if err := checkIndex("index", buf[:c-a], x.Dims[m]); err != nil {
					return fmt.Errorf("block %d, nonzero %d on: mode %d: %w", b, a, m+1, err)
				}
			}
		}
	}
	return nil
}
