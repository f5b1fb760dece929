package graphenc

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
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
	return NewEncoder(x).Encode(shape, b)
}

// Encoder encodes graphs of one tensor for several slice shapes, sharing
// what depends on one mode alone: which of its indices are non-empty and
// the node each nonzero falls in, per budget side. The graphs of every
// mode of an order-N tensor need N such assignments, not 2N, which is a
// third of encoding all of them (predict --mode all). An Encoder is safe
// for concurrent use; x must not change while it is in use.
type Encoder struct {
	x     *formats.COO
	mu    sync.Mutex
	nodes map[[2]int]*nodeAssignment // by (mode, nodes budget)
}

// nodeAssignment is assignNodes' result for one mode and budget, made
// once.
type nodeAssignment struct {
	once  sync.Once
	node  []uint32
	first []int
	n     int
	bad   int
}

// NewEncoder returns an Encoder of x.
func NewEncoder(x *formats.COO) *Encoder {
	return &Encoder{x: x, nodes: map[[2]int]*nodeAssignment{}}
}

// assignment returns the node assignment of mode at the budget, made on
// first use.
func (e *Encoder) assignment(mode, budget int) *nodeAssignment {
	e.mu.Lock()
	a, ok := e.nodes[[2]int{mode, budget}]
	if !ok {
		a = &nodeAssignment{}
		e.nodes[[2]int{mode, budget}] = a
	}
	e.mu.Unlock()
	a.once.Do(func() { a.node, a.first, a.n, a.bad = assignNodes(e.x.Inds[mode], e.x.Dims[mode], budget) })
	return a
}

// Encode returns x's graph for the slice shape within the budget, as the
// function Encode does.
func (e *Encoder) Encode(shape Shape, b Budget) (*Graph, error) {
	x := e.x
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

	// Pass 1: which rows and columns are non-empty (checking the indices),
	// and the node of every nonzero's row and column.
	ra, ca := e.assignment(shape.Rows, b.Rows), e.assignment(shape.Cols, b.Cols)
	for _, a := range []*nodeAssignment{ra, ca} {
		if a.bad >= 0 {
			return nil, fmt.Errorf("graph encoding: nonzero %d has index beyond the dims", a.bad+1)
		}
	}
	// The node arrays are only read; the graph gets its own bucket bounds.
	rowNode, rowFirst, nonEmptyRows := ra.node, slices.Clone(ra.first), ra.n
	colNode, colFirst, nonEmptyCols := ca.node, slices.Clone(ca.first), ca.n
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
	work := func(p int) {
		pt := part{w: make([]uint64, g.RowNodes*g.ColNodes), rows: newNodeStats(g.RowNodes), cols: newNodeStats(g.ColNodes)}
		lo, hi := p*nnz/workers, (p+1)*nnz/workers
		edges(pt.w, pt.rows, pt.cols, g.ColNodes, ri[lo:hi], ci[lo:hi], rowNode[lo:hi], colNode[lo:hi])
		parts[p] = pt
	}
	var wg sync.WaitGroup
	for p := 1; p < workers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(p)
		}()
	}
	work(0) // on this goroutine: one worker starts nothing
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
	// Most weights of a sample's graph are small counts, repeated across
	// the cells: their logarithms are computed once each.
	var logOf [64]float64
	lw := math.Log1p(float64(wmax))
	for r := range g.RowNodes {
		for c := range g.ColNodes {
			v := w[r*g.ColNodes+c]
			g.Weights[r*b.Cols+c] = v
			if v == 0 {
				continue
			}
			var l float64
			if v < uint64(len(logOf)) {
				if logOf[v] == 0 {
					logOf[v] = math.Log1p(float64(v))
				}
				l = logOf[v]
			} else {
				l = math.Log1p(float64(v))
			}
			g.Adj[r*b.Cols+c] = float32(l / lw)
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

// edges adds the nonzeros with row and column indices ri and ci, in row
// and column nodes rowNode and colNode, to the edge weights w and the
// node statistics.
func edges(w []uint64, rows, cols []nodeStats, colNodes int, ri, ci, rowNode, colNode []uint32) {
	ci, rowNode, colNode = ci[:len(ri)], rowNode[:len(ri)], colNode[:len(ri)]
	for k, i := range ri {
		j := ci[k]
		r, c := rowNode[k], colNode[k]
		w[int(r)*colNodes+int(c)]++
		rows[r].add(j)
		cols[c].add(i)
	}
}

// bitmapSpan is how many indices of a dim past the nonzeros one nonzero
// may pay for: up to that many, assignNodes ranks indices in a bitmap of
// the dim (an eighth of a byte per index, and a prefix count per 64); a
// sparser mode is sorted instead.
const bitmapSpan = 256

// assignNodes numbers the non-empty indices of a mode in order and groups
// them into at most budget contiguous buckets of nearly equal counts. It
// returns the node of each nonzero, the first non-empty rank of each node
// (len nodes+1) and the count of non-empty indices; bad is the first
// nonzero whose index is not below dim, or -1.
//
// An index's rank among the non-empty ones comes from a bitmap of the dim
// with a prefix count per word: a few sequential passes, and the random
// reads stay in a table of dim/64 words. That is how this ran on a
// sample of a big tensor, whose dims are many times its nonzeros, at a
// fraction of the cost of sorting (index, position) pairs, which it did
// before. Past bitmapSpan indices per nonzero (hashed ids), the bitmap
// would cost more than the nonzeros: the indices are sorted instead, and
// a nonzero's node is found among the nodes' first indices.
func assignNodes(ind []uint32, dim, budget int) (node []uint32, first []int, n, bad int) {
	top := uint32(max(dim, 1) - 1)
	var over uint32
	for _, i := range ind {
		over |= max(i, top) - top
	}
	if over != 0 || dim < 1 {
		for k, i := range ind {
			if int(i) >= dim {
				return nil, nil, 0, k
			}
		}
	}
	node = make([]uint32, len(ind))
	if uint64(dim) > uint64(bitmapSpan)*uint64(max(len(ind), 1<<12)) {
		n, first = sortedNodes(ind, dim, budget, node)
		return node, first, n, -1
	}
	words := make([]uint64, (dim+63)/64)
	for _, i := range ind {
		words[i>>6] |= 1 << (i & 63)
	}
	prefix := make([]uint32, len(words))
	for w, v := range words {
		prefix[w] = uint32(n)
		n += bits.OnesCount64(v)
	}
	first = nodeFirsts(n, budget)
	nodes := len(first) - 1
	ofRank := make([]uint32, n)
	for b := range nodes {
		for r := first[b]; r < first[b+1]; r++ {
			ofRank[r] = uint32(b)
		}
	}
	for k, i := range ind {
		w := i >> 6
		r := prefix[w] + uint32(bits.OnesCount64(words[w]&(1<<(i&63)-1)))
		node[k] = ofRank[r]
	}
	return node, first, n, -1
}

// nodeFirsts returns the first rank of each of min(n, budget) buckets of
// n ranks of nearly equal counts, and n.
func nodeFirsts(n, budget int) []int {
	nodes := min(n, budget)
	first := make([]int, nodes+1)
	for i := range first {
		first[i] = i * n / max(nodes, 1)
	}
	return first
}

// sortedNodes is assignNodes for a mode whose dim is far larger than its
// nonzeros: it sorts the indices, reads off the non-empty ones and the
// first index of each node, and finds each nonzero's node among those by
// binary search. It fills node and returns the count of non-empty indices
// and the nodes' first ranks.
func sortedNodes(ind []uint32, dim, budget int, node []uint32) (n int, first []int) {
	keys := make([]uint64, 2*len(ind))
	for k, i := range ind {
		keys[k] = uint64(i)
	}
	sorted := radix.Sort(keys[:len(ind)], keys[len(ind):], bits.Len(uint(dim-1)))
	distinct := slices.Compact(sorted)
	n = len(distinct)
	first = nodeFirsts(n, budget)
	nodes := len(first) - 1
	// starts[b] is node b's first index; node b holds the indices from
	// it up to the next node's first.
	starts := make([]uint32, nodes)
	for b := range nodes {
		starts[b] = uint32(distinct[first[b]])
	}
	for k, i := range ind {
		// The last node whose first index is at most i.
		lo, hi := 0, nodes
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if starts[mid] <= i {
				lo = mid
			} else {
				hi = mid
			}
		}
		node[k] = uint32(lo)
	}
	return n, first
}
