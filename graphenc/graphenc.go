package graphenc

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/radix"
)

// Shape is the slice shape a tensor is lowered onto: the mode whose index
// is the mapping matrix's row and the mode whose index is its column. Every
// other mode is projected out: the mapping-matrix entry (a, b) counts the
// nonzeros with index a in mode Rows and b in mode Cols, over all slices.
type Shape struct{ Rows, Cols int }

// SpTTMShape returns the slice shape of SpTTM along mode (0-based). Columns
// are the contracted mode, whose index selects the factor row an entry
// reads; rows are the first mode other than mode and its slicing mode
// (formats.DefaultSliceMode), so the mapping matrix is what the fiber
// matrix's slices look like stacked on each other. For an order-2 tensor it
// is the matrix with the contracted mode as columns.
func SpTTMShape(order, mode int) Shape {
	if order == 2 {
		return Shape{Rows: 1 - mode, Cols: mode}
	}
	slice := formats.DefaultSliceMode(mode)
	for m := range order {
		if m != mode && m != slice {
			return Shape{Rows: m, Cols: mode}
		}
	}
	panic("unreachable: order >= 3 has a third mode")
}

// MTTKRPShape returns the slice shape of MTTKRP along mode (0-based): rows
// are the output mode, whose rows a kernel writes and balances, and columns
// the other mode with the largest dimension (the lowest-numbered on ties),
// whose factor rows are the most numerous reads. For an order-2 tensor it
// is the matrix with the output mode as rows.
func MTTKRPShape(dims []int, mode int) Shape {
	col := -1
	for m, d := range dims {
		if m != mode && (col < 0 || d > dims[col]) {
			col = m
		}
	}
	return Shape{Rows: mode, Cols: col}
}

// Budget is the most row and column nodes a graph keeps: the fixed input
// shape of the model.
type Budget struct{ Rows, Cols int }

// DefaultBudget keeps 32 row and 32 column nodes. The paper's SPT-GCN used
// graphs of 128 + 128 nodes; at that size the model's inference alone
// costs 1.3-2.8 ms here (2 cores), several times the kernels it tunes at
// 10^6 nonzeros, where 32 + 32 nodes cost about 0.04 ms (docs/model.md,
// "Prediction cost"). A model file records its own budget.
var DefaultBudget = Budget{Rows: 32, Cols: 32}

// NodeFeatures is the number of features per node.
const NodeFeatures = 5

// NodeFeatureNames name the node features, in order (Graph documents
// them).
var NodeFeatureNames = [NodeFeatures]string{"nnz", "max_index", "min_index", "mean_index", "var_index"}

// Graph is the model's input for one tensor, op and mode: the weighted
// bipartite graph of the mapping matrix's non-empty rows and columns,
// bucketed to the budget, as dense budget-shaped arrays padded with zeros.
//
// Node i of a side stands for the non-empty rows (columns) First[i] to
// First[i+1]-1 of that side in index order: one each when the side fits
// the budget (Exact), else contiguous buckets of nearly equal counts.
//
// Normalisations, all into [0, 1]:
//   - Adj(a, b) = log(1+w)/log(1+wmax), w the summed mapping-matrix entries
//     of the two nodes (nonzeros), wmax the largest w of the graph;
//   - feature 0, nonzeros: log(1+n)/log(1+nnz), n the tensor nonzeros in the
//     node's rows (columns);
//   - features 1-3, max, min and mean of the column (row) indices of those
//     nonzeros, divided by the other mode's dim minus 1 (0 when it is 1);
//   - feature 4, their variance on that scale, times 4 (a variable in
//     [0, 1] has variance at most 1/4).
//
// Nonzeros are counted with multiplicity: a mapping-matrix entry of 3 adds
// three to the node's count and its index three times to the statistics.
// This keeps the encoding one streaming pass with memory O(dims +
// budget²), which distinct positions would not.
type Graph struct {
	Shape              Shape
	Budget             Budget
	Dims               [2]int // dims of the row and column modes
	NNZ                int
	RowNodes, ColNodes int  // nodes in use, at most the budget
	NonEmptyRows       int  // non-empty rows of the mapping matrix
	NonEmptyCols       int  // non-empty columns
	Exact              bool // both sides fit the budget: one node per row and column
	RowFirst, ColFirst []int
	Adj                []float32 // Budget.Rows x Budget.Cols, row-major
	RowFeat            []float32 // Budget.Rows x NodeFeatures
	ColFeat            []float32 // Budget.Cols x NodeFeatures
	RowMask, ColMask   []float32 // 1 for a node in use, 0 for padding
	// Weights holds the raw summed entries behind Adj (RowNodes x ColNodes
	// in a Budget.Cols-wide row-major array), for inspection and tests.
	Weights []uint64
}

// nodeStats accumulates one node's statistics exactly in integers, so the
// result does not depend on how the nonzeros were split among goroutines.
type nodeStats struct {
	n        uint64
	sum      uint64
	sqHi     uint64 // sum of squares, 128 bits
	sqLo     uint64
	min, max uint32
}

// newNodeStats returns n empty statistics: min starts above every index,
// so that add needs no first-sample test.
func newNodeStats(n int) []nodeStats {
	s := make([]nodeStats, n)
	for i := range s {
		s[i].min = math.MaxUint32
	}
	return s
}

func (s *nodeStats) add(idx uint32) {
	s.n++
	s.sum += uint64(idx)
	var c uint64
	s.sqLo, c = bits.Add64(s.sqLo, uint64(idx)*uint64(idx), 0)
	s.sqHi += c
	s.min = min(s.min, idx)
	s.max = max(s.max, idx)
}

func (s *nodeStats) merge(o *nodeStats) {
	if o.n == 0 {
		return
	}
	if s.n == 0 || o.min < s.min {
		s.min = o.min
	}
	s.max = max(s.max, o.max)
	s.n += o.n
	s.sum += o.sum
	var c uint64
	s.sqLo, c = bits.Add64(s.sqLo, o.sqLo, 0)
	s.sqHi += o.sqHi + c
}

// features writes the node's five normalised features; dim is the dim of
// the mode whose indices it summarises.
func (s *nodeStats) features(dst []float32, nnz, dim int) {
	if s.n == 0 {
		return
	}
	scale := 0.0
	if dim > 1 {
		scale = 1 / float64(dim-1)
	}
	n := float64(s.n)
	mean := float64(s.sum) / n
	sq := (float64(s.sqHi)*math.Exp2(64) + float64(s.sqLo)) / n
	variance := max(sq-mean*mean, 0)
	dst[0] = float32(math.Log1p(n) / math.Log1p(float64(max(nnz, 1))))
	dst[1] = float32(float64(s.max) * scale)
	dst[2] = float32(float64(s.min) * scale)
	dst[3] = float32(mean * scale)
	dst[4] = float32(min(4*variance*scale*scale, 1))
}

// Encode lowers x onto the slice shape and returns its graph within the
// budget. It makes two passes over the nonzeros (counts, then edges and
// statistics), in parallel over chunks, and allocates O(dims + budget²).
func Encode(x *formats.COO, shape Shape, b Budget) (*Graph, error) {
	if shape.Rows == shape.Cols || shape.Rows < 0 || shape.Cols < 0 || shape.Rows >= x.Order() || shape.Cols >= x.Order() {
		return nil, fmt.Errorf("graph encoding: slice shape modes %d x %d invalid for an order-%d tensor", shape.Rows+1, shape.Cols+1, x.Order())
	}
	if b.Rows < 1 || b.Cols < 1 {
		return nil, fmt.Errorf("graph encoding: budget %d x %d, expected at least 1 x 1", b.Rows, b.Cols)
	}
	ri, ci := x.Inds[shape.Rows], x.Inds[shape.Cols]
	nnz := x.NNZ()
	if len(ri) != nnz || len(ci) != nnz {
		return nil, fmt.Errorf("graph encoding: index arrays of %d and %d for %d values", len(ri), len(ci), nnz)
	}
	dr, dc := x.Dims[shape.Rows], x.Dims[shape.Cols]
	g := &Graph{Shape: shape, Budget: b, Dims: [2]int{dr, dc}, NNZ: nnz,
		Adj: make([]float32, b.Rows*b.Cols), RowFeat: make([]float32, b.Rows*NodeFeatures),
		ColFeat: make([]float32, b.Cols*NodeFeatures), RowMask: make([]float32, b.Rows), ColMask: make([]float32, b.Cols),
		Weights: make([]uint64, b.Rows*b.Cols)}

	// Pass 1: which rows and columns are non-empty (checking the indices).
	rowKey, rowNode, rowFirst, nonEmptyRows, bad := assignNodes(ri, dr, b.Rows)
	if bad >= 0 {
		return nil, fmt.Errorf("graph encoding: nonzero %d has index beyond the dims", bad+1)
	}
	colKey, colNode, colFirst, nonEmptyCols, bad := assignNodes(ci, dc, b.Cols)
	if bad >= 0 {
		return nil, fmt.Errorf("graph encoding: nonzero %d has index beyond the dims", bad+1)
	}
	g.RowFirst, g.NonEmptyRows, g.ColFirst, g.NonEmptyCols = rowFirst, nonEmptyRows, colFirst, nonEmptyCols
	g.RowNodes, g.ColNodes = len(g.RowFirst)-1, len(g.ColFirst)-1
	g.Exact = g.NonEmptyRows <= b.Rows && g.NonEmptyCols <= b.Cols

	// Pass 2: edge weights and node statistics, per worker, merged in
	// worker order (integer sums: the order does not change the result).
	type part struct {
		w          []uint64
		rows, cols []nodeStats
	}
	// A few thousand nonzeros per worker already pay for a goroutine and
	// the merge of its budget-sized partial sums: a sample of a big tensor
	// is encoded on every core.
	workers := max(1, min(runtime.GOMAXPROCS(0), nnz/(1<<12)))
	parts := make([]part, workers)
	// Node ids of at most 256 nodes fit a byte: the per-index node tables
	// then take a quarter of the cache, and the pass is bound by their
	// random reads.
	var rowNode8, colNode8 []uint8
	if g.RowNodes <= 256 && g.ColNodes <= 256 {
		rowNode8, colNode8 = narrow(rowNode), narrow(colNode)
	}
	var wg sync.WaitGroup
	for p := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt := part{w: make([]uint64, g.RowNodes*g.ColNodes), rows: newNodeStats(g.RowNodes), cols: newNodeStats(g.ColNodes)}
			lo, hi := p*nnz/workers, (p+1)*nnz/workers
			if rowNode8 != nil {
				edges(&pt.w, pt.rows, pt.cols, g.ColNodes, ri[lo:hi], ci[lo:hi], rowKey[lo:hi], colKey[lo:hi], rowNode8, colNode8)
			} else {
				edges(&pt.w, pt.rows, pt.cols, g.ColNodes, ri[lo:hi], ci[lo:hi], rowKey[lo:hi], colKey[lo:hi], rowNode, colNode)
			}
			parts[p] = pt
		}()
	}
	wg.Wait()
	rows, cols := parts[0].rows, parts[0].cols
	w := parts[0].w
	for _, pt := range parts[1:] {
		for i := range w {
			w[i] += pt.w[i]
		}
		for i := range rows {
			rows[i].merge(&pt.rows[i])
		}
		for i := range cols {
			cols[i].merge(&pt.cols[i])
		}
	}

	var wmax uint64
	for _, v := range w {
		wmax = max(wmax, v)
	}
	for r := range g.RowNodes {
		for c := range g.ColNodes {
			v := w[r*g.ColNodes+c]
			g.Weights[r*b.Cols+c] = v
			if v > 0 {
				g.Adj[r*b.Cols+c] = float32(math.Log1p(float64(v)) / math.Log1p(float64(wmax)))
			}
		}
	}
	for r := range g.RowNodes {
		g.RowMask[r] = 1
		rows[r].features(g.RowFeat[r*NodeFeatures:(r+1)*NodeFeatures], nnz, dc)
	}
	for c := range g.ColNodes {
		g.ColMask[c] = 1
		cols[c].features(g.ColFeat[c*NodeFeatures:(c+1)*NodeFeatures], nnz, dr)
	}
	return g, nil
}

// edges adds the nonzeros with row and column indices ri and ci (looked
// up through the keys) to the edge weights w and the node statistics.
func edges[N uint8 | uint32](w *[]uint64, rows, cols []nodeStats, colNodes int, ri, ci, rowKey, colKey []uint32, rowNode, colNode []N) {
	wt := *w
	ci, rowKey, colKey = ci[:len(ri)], rowKey[:len(ri)], colKey[:len(ri)]
	for k, i := range ri {
		j := ci[k]
		r, c := rowNode[rowKey[k]], colNode[colKey[k]]
		wt[int(r)*colNodes+int(c)]++
		rows[r].add(j)
		cols[c].add(i)
	}
}

// narrow copies node ids below 256 into bytes.
func narrow(node []uint32) []uint8 {
	b := make([]uint8, len(node))
	for i, v := range node {
		b[i] = uint8(v)
	}
	return b
}

// assignNodes numbers the non-empty indices of a mode in order and groups
// them into at most budget contiguous buckets of nearly equal counts. It
// returns per nonzero the key into node, node the node of each key, the
// first non-empty rank of each node (len nodes+1) and the count of
// non-empty indices.
//
// The key is the index itself when the dim is within a small multiple of
// the nonzeros, and node has one entry per index. A larger dim (a sample
// of a big tensor, a mode of hashed ids) would make that O(dim) time and
// memory, so its non-empty indices are found by a radix sort of (index,
// position) pairs and the key is the index's rank among them: a few
// passes over the nonzeros and O(nnz) memory. bad is the first nonzero
// whose index is not below dim, or -1.
func assignNodes(ind []uint32, dim, budget int) (key, node []uint32, first []int, n, bad int) {
	var key64 []uint64 // index<<posBits | position, sorted, when keyed by rank
	var seen []bool    // whether each index is non-empty, when keyed by index
	posBits := bits.Len(uint(len(ind)))
	if dim > 4*len(ind) {
		key64 = make([]uint64, len(ind))
		for k, i := range ind {
			if int(i) >= dim {
				return nil, nil, nil, 0, k
			}
			key64[k] = uint64(i)<<posBits | uint64(k)
		}
		// Sorting (index, position) pairs gives each position its rank in
		// one walk, with no search per nonzero.
		key64 = radix.Sort(key64, make([]uint64, len(ind)), bits.Len(uint(dim-1))+posBits)
		for k := range key64 {
			if k == 0 || key64[k]>>posBits != key64[k-1]>>posBits {
				n++
			}
		}
	} else {
		seen = make([]bool, dim)
		for k, i := range ind {
			if int(i) >= dim {
				return nil, nil, nil, 0, k
			}
			seen[i] = true
		}
		for _, s := range seen {
			if s {
				n++
			}
		}
		node = make([]uint32, dim)
	}
	nodes := min(n, budget)
	first = make([]int, nodes+1)
	for i := range first {
		first[i] = i * n / max(nodes, 1)
	}
	if key64 == nil {
		// Ranks grow with the index: walk the buckets alongside. An empty
		// index gets the node of the next non-empty one (no nonzero
		// looks it up).
		b, rank := 0, 0
		for i, s := range seen {
			for b+1 < nodes && first[b+1] <= rank {
				b++
			}
			node[i] = uint32(b)
			if s {
				rank++
			}
		}
		return ind, node, first, n, -1
	}
	node = make([]uint32, n)
	for r, b := 0, 0; r < n; r++ {
		for b+1 < nodes && first[b+1] <= r {
			b++
		}
		node[r] = uint32(b)
	}
	key = make([]uint32, len(ind))
	posMask := uint64(1)<<posBits - 1
	rank := -1
	for k, v := range key64 {
		if k == 0 || v>>posBits != key64[k-1]>>posBits {
			rank++
		}
		key[v&posMask] = uint32(rank)
	}
	return key, node, first, n, -1
}
