package formats

import "sort"

// EntrySplits returns parts+1 entry offsets, from 0 to the number of
// entries, that cut x into parts ranges of about equal entries, each
// starting at a row start. A COO SpTTM kernel then lets each goroutine own
// whole rows of Y (no atomics, no reduction) while balancing by entries, not
// rows. It works on any FiberCOO whose entries are in row order, the
// remainder of a HYB included. A row is never cut, so a row longer than one
// part's share makes that part heavier; ranges may be empty.
func (x *FiberCOO) EntrySplits(parts int) []int {
	parts = max(parts, 1)
	n := len(x.RowInd)
	splits := make([]int, parts+1)
	if n == 0 {
		return splits
	}
	for p := 1; p < parts; p++ {
		t := int(int64(n) * int64(p) / int64(parts))
		// Move back to the start of the row holding entry t.
		row := x.RowInd[t]
		splits[p] = sort.Search(t, func(e int) bool { return x.RowInd[e] >= row })
	}
	splits[parts] = n
	return splits
}
