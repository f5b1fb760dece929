package formats

import "slices"

// UsedIndices returns the number of distinct indices of mode m: the mode's
// non-empty slices. Dense operands are sized by Dims[m], so a mode that
// uses few of its indices (identifiers as indices, a dim declared far past
// the data) wastes what UsedIndices does not count; Compact removes that.
func (t *COO) UsedIndices(m int) int {
	return len(t.usedIndices(m))
}

// usedIndices returns the distinct mode-m indices in increasing order.
func (t *COO) usedIndices(m int) []uint32 {
	inds := t.Inds[m]
	if denseMap(t.Dims[m], len(inds)) {
		seen := make([]bool, t.Dims[m])
		for _, i := range inds {
			seen[i] = true
		}
		var used []uint32
		for i, s := range seen {
			if s {
				used = append(used, uint32(i))
			}
		}
		return used
	}
	used := slices.Clone(inds)
	slices.Sort(used)
	return slices.Compact(used)
}

// denseMap reports whether a mode's indices are renumbered through an
// array of its dim (one pass, dim·4 bytes) rather than by sorting a copy
// of them and searching it: when the dim is no more than a few times the
// nonzeros, the array costs less than the sort.
func denseMap(dim, nnz int) bool { return dim <= 8*nnz+1024 }

// Compact returns a copy of t in which each mode's indices are renumbered
// 0, 1, … in increasing order of the original ones, leaving out the
// indices no nonzero uses, and the dims shrink to the counts. orig[m][j]
// is the original mode-m index of new index j. The nonzeros keep their
// order and values.
//
// A tensor whose indices are sparse identifiers (dims of 10^9 with 10^5
// used) needs dense factors of its full dims in every kernel and
// decomposition; its compact copy needs them only for the indices used. A
// factor row j of the compact tensor's decomposition is row orig[m][j] of
// the original's, and the rows of unused indices are zero there (they
// take no part in any nonzero).
func (t *COO) Compact() (c *COO, orig [][]uint32) {
	c = &COO{Dims: make([]int, t.Order()), Inds: make([][]uint32, t.Order()), Vals: slices.Clone(t.Vals)}
	orig = make([][]uint32, t.Order())
	for m, inds := range t.Inds {
		used := t.usedIndices(m)
		orig[m] = used
		c.Dims[m] = max(len(used), 1) // an empty tensor keeps dims of 1
		c.Inds[m] = renumbered(inds, used, t.Dims[m])
	}
	return c, orig
}

// CompactMode returns t with mode m's indices renumbered as Compact does,
// and the original index of each new one. The other modes' index arrays
// and the values are shared with t, not copied.
func (t *COO) CompactMode(m int) (c *COO, orig []uint32) {
	c = &COO{Dims: slices.Clone(t.Dims), Inds: slices.Clone(t.Inds), Vals: t.Vals}
	orig = t.usedIndices(m)
	c.Dims[m] = max(len(orig), 1)
	c.Inds[m] = renumbered(t.Inds[m], orig, t.Dims[m])
	return c, orig
}

// renumbered returns inds with each index replaced by its position in
// used, the sorted distinct indices of a mode of dim dim.
func renumbered(inds, used []uint32, dim int) []uint32 {
	out := make([]uint32, len(inds))
	if len(used) == dim {
		copy(out, inds)
		return out
	}
	if denseMap(dim, len(inds)) {
		renumber := make([]uint32, dim)
		for j, i := range used {
			renumber[i] = uint32(j)
		}
		parallelChunks(len(inds), workers(len(inds), 1<<16), func(_, lo, hi int) {
			for k := lo; k < hi; k++ {
				out[k] = renumber[inds[k]]
			}
		})
		return out
	}
	parallelChunks(len(inds), workers(len(inds), 1<<16), func(_, lo, hi int) {
		for k := lo; k < hi; k++ {
			j, _ := slices.BinarySearch(used, inds[k])
			out[k] = uint32(j)
		}
	})
	return out
}
