package formats

import "sort"

// RowSplits returns parts+1 row boundaries and, beside them, the offsets of
// the same boundaries in the COO part, that cut x into parts ranges of
// about equal work: goroutine p runs ELL rows rows[p] to rows[p+1]-1 and
// COO entries entries[p] to entries[p+1]-1, which belong to those rows, so
// each owns its rows of Y and needs no barrier between the two parts.
//
// The work before row r is counted as (Width+1)·r plus the COO entries of
// the rows before r: every ELL slot, padding included, costs an FMA sweep
// like an entry, and every row a sweep to write its output. A row is never
// cut; ranges may be empty.
func (x *HYB) RowSplits(parts int) (rows, entries []int) {
	parts = max(parts, 1)
	nrows, rest := x.ELL.Rows, x.COO.RowInd
	// cooBefore returns the COO entries of the rows before r.
	cooBefore := func(r int) int {
		return sort.Search(len(rest), func(e int) bool { return int(rest[e]) >= r })
	}
	slot := int64(x.ELL.Width) + 1
	total := slot*int64(nrows) + int64(len(rest))
	rows, entries = make([]int, parts+1), make([]int, parts+1)
	for p := 1; p < parts; p++ {
		target := total * int64(p) / int64(parts)
		rows[p] = sort.Search(nrows, func(r int) bool { return slot*int64(r)+int64(cooBefore(r)) >= target })
		entries[p] = cooBefore(rows[p])
	}
	rows[parts], entries[parts] = nrows, len(rest)
	return rows, entries
}
