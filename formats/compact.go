package formats

import (
	"fmt"
	"slices"
)

// UsedIndices returns the number of distinct indices of mode m of a valid
// tensor: the mode's non-empty slices. Dense operands are sized by
// Dims[m], so a mode that uses few of its indices (identifiers as
// indices, a dim declared far past the data) wastes what UsedIndices does
// not count; Compact removes that.
func (t *COO) UsedIndices(m int) int {
	r, _ := RankIndices(t.Inds[m], t.Dims[m])
	return r.N
}

// Compact returns a copy of t in which each mode's indices are renumbered
// 0, 1, … in increasing order of the original ones, leaving out the
// indices no nonzero uses, and the dims shrink to the counts. orig[m][j]
// is the original mode-m index of new index j. The nonzeros keep their
// order and values. It fails on an index not below its dim.
//
// A tensor whose indices are sparse identifiers (dims of 10^9 with 10^5
// used) needs dense factors of its full dims in every kernel and
// decomposition; its compact copy needs them only for the indices used. A
// factor row j of the compact tensor's decomposition is row orig[m][j] of
// the original's, and the rows of unused indices are zero there (they
// take no part in any nonzero).
func (t *COO) Compact() (c *COO, orig [][]uint32, err error) {
	c = &COO{Dims: make([]int, t.Order()), Inds: make([][]uint32, t.Order()), Vals: slices.Clone(t.Vals)}
	orig = make([][]uint32, t.Order())
	for m := range t.Inds {
		if c.Inds[m], orig[m], err = t.renumber(m); err != nil {
			return nil, nil, err
		}
		c.Dims[m] = max(len(orig[m]), 1) // an empty tensor keeps dims of 1
	}
	return c, orig, nil
}

// CompactMode returns t with mode m's indices renumbered as Compact does,
// and the original index of each new one. The other modes' index arrays
// and the values are shared with t, not copied.
func (t *COO) CompactMode(m int) (c *COO, orig []uint32, err error) {
	if err := t.checkArrays(); err != nil {
		return nil, nil, err
	}
	if err := checkModes([]int{m}, t.Order(), false); err != nil {
		return nil, nil, err
	}
	c = &COO{Dims: slices.Clone(t.Dims), Inds: slices.Clone(t.Inds), Vals: t.Vals}
	if c.Inds[m], orig, err = t.renumber(m); err != nil {
		return nil, nil, err
	}
	c.Dims[m] = max(len(orig), 1)
	return c, orig, nil
}

// renumber returns mode m's indices replaced by their ranks among the
// mode's distinct indices (RankIndices), and the distinct indices in rank
// order.
func (t *COO) renumber(m int) (ranks, orig []uint32, err error) {
	r, bad := RankIndices(t.Inds[m], t.Dims[m])
	if bad >= 0 {
		return nil, nil, fmt.Errorf("compact: nonzero %d has mode-%d index %d, not below the dim %d", bad, m+1, t.Inds[m][bad], t.Dims[m])
	}
	orig = make([]uint32, r.N)
	for k, j := range r.Of {
		orig[j] = t.Inds[m][k]
	}
	return r.Of, orig, nil
}
