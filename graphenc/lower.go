package graphenc

import (
	"fmt"
	"slices"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// ShapeFor returns the slice shape of op along mode (0-based) of a tensor
// of the given dims: SpTTMShape or MTTKRPShape.
func ShapeFor(op hetero.Op, dims []int, mode int) (Shape, error) {
	if len(dims) < 2 {
		return Shape{}, fmt.Errorf("graph encoding: order-%d tensor, expected order 2 or more", len(dims))
	}
	if mode < 0 || mode >= len(dims) {
		return Shape{}, fmt.Errorf("graph encoding: mode %d out of range for an order-%d tensor", mode+1, len(dims))
	}
	switch op {
	case hetero.SpTTM:
		return SpTTMShape(len(dims), mode), nil
	case hetero.MTTKRP:
		return MTTKRPShape(dims, mode), nil
	}
	return Shape{}, fmt.Errorf("graph encoding: unknown op %v", op)
}

// MappingMatrix is a tensor projected onto a slice shape: entry (a, b)
// counts the nonzeros with index a in mode Shape.Rows and b in mode
// Shape.Cols. It is stored as compressed rows of its non-zero entries,
// columns increasing within a row.
type MappingMatrix struct {
	Shape      Shape
	Rows, Cols int   // the dims of the two modes
	RowPtr     []int // len Rows+1
	ColInd     []uint32
	Count      []uint64
}

// At returns entry (a, b).
func (m *MappingMatrix) At(a, b int) uint64 {
	cols := m.ColInd[m.RowPtr[a]:m.RowPtr[a+1]]
	if k, ok := slices.BinarySearch(cols, uint32(b)); ok {
		return m.Count[m.RowPtr[a]+k]
	}
	return 0
}

// Lower returns the mapping matrix of x for op along mode (0-based). It
// sorts the nonzeros' positions, so it costs O(nnz log nnz) time and O(nnz)
// memory: it is for inspection and tests. Encode builds the model's input
// in O(dims + budget²) without it.
func Lower(x *formats.COO, op hetero.Op, mode int) (*MappingMatrix, error) {
	shape, err := ShapeFor(op, x.Dims, mode)
	if err != nil {
		return nil, err
	}
	rows, cols := x.Dims[shape.Rows], x.Dims[shape.Cols]
	ri, ci := x.Inds[shape.Rows], x.Inds[shape.Cols]
	if len(ri) != x.NNZ() || len(ci) != x.NNZ() {
		return nil, fmt.Errorf("graph encoding: index arrays of %d and %d for %d values", len(ri), len(ci), x.NNZ())
	}
	keys := make([]uint64, len(ri))
	for k := range keys {
		if int(ri[k]) >= rows || int(ci[k]) >= cols {
			return nil, fmt.Errorf("graph encoding: nonzero %d has an index beyond the dims", k+1)
		}
		keys[k] = uint64(ri[k])<<32 | uint64(ci[k])
	}
	slices.Sort(keys)
	m := &MappingMatrix{Shape: shape, Rows: rows, Cols: cols, RowPtr: make([]int, rows+1)}
	for k := 0; k < len(keys); {
		j := k + 1
		for j < len(keys) && keys[j] == keys[k] {
			j++
		}
		m.RowPtr[keys[k]>>32+1]++
		m.ColInd = append(m.ColInd, uint32(keys[k]))
		m.Count = append(m.Count, uint64(j-k))
		k = j
	}
	for a := range rows {
		m.RowPtr[a+1] += m.RowPtr[a]
	}
	return m, nil
}
