package graphenc

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/internal/warm"
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

// features writes the node's five normalised features; logNNZ is
// log1p of the graph's nonzeros (at least 1), dim the dim of the mode
// whose indices it summarises.
func (s *nodeStats) features(dst []float32, logNNZ float64, dim int) {
	if s.n == 0 {
		return
	}
	scale := 0.0
	if dim > 1 {
		scale = 1 / float64(dim-1)
	}
	n := float64(s.n)
	mean := float64(s.sum) / n
	sq := (float64(s.sqHi)*0x1p64 + float64(s.sqLo)) / n
	variance := max(sq-mean*mean, 0)
	dst[0] = float32(math.Log1p(n) / logNNZ)
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
// what depends on one mode alone: the ranks of its non-empty indices, and
// per budget side the node each rank falls in. The graphs of every mode of
// an order-N tensor need N rankings, not 2N (predict --mode all), and a
// caller that has ranked the indices already (features.Summary, counting
// slices) hands them over (NewEncoderRanked). An Encoder is safe for
// concurrent use; x must not change while it is in use.
//
// A graph of a square budget is also kept: the graph of the transposed
// shape is its transpose (rows and columns swap roles, every weight and
// feature the same), so Encode returns that without a pass over the
// nonzeros. MTTKRP's shapes pair each mode with the largest other, so two
// modes of most tensors are each other's transposes. The graphs an
// Encoder returns must therefore not be modified.
type Encoder struct {
	x      *formats.COO
	rank   func(mode int) formats.Ranks // where ranks come from, when set (NewEncoderRanked)
	ranks  []modeRanks
	mu     sync.Mutex
	nodes  map[[2]int]*nodeAssignment // by (mode, nodes budget)
	graphs map[graphKey]*Graph        // square budgets only
}

type graphKey struct {
	shape  Shape
	budget Budget
}

// modeRanks is one mode's formats.Ranks, made once; bad is the first nonzero
// whose index is beyond the dim, or -1.
type modeRanks struct {
	once par.Once // the modes' graphs made side by side share ranks (features.Summary)
	r    formats.Ranks
	bad  int
}

// nodeAssignment groups one mode's ranks into at most a budget of nodes:
// node b holds the ranks first[b] to first[b+1]-1, and ofRank maps a rank
// to its node.
type nodeAssignment struct {
	once   par.Once
	ofRank []uint32
	first  []int
}

// NewEncoder returns an Encoder of x.
func NewEncoder(x *formats.COO) *Encoder {
	return &Encoder{x: x, ranks: make([]modeRanks, x.Order()), nodes: map[[2]int]*nodeAssignment{}, graphs: map[graphKey]*Graph{}}
}

// NewEncoderRanked returns an Encoder of x that asks rank(m) for mode m's
// ranks (formats.RankIndices of x.Inds[m], whose indices the caller has checked
// against the dims) when it first needs them, instead of ranking the
// indices itself: a caller that ranks the modes for other uses too shares
// them with the encoder. Ranks whose length is not x's nonzero count are
// ignored, and the encoder ranks that mode itself.
func NewEncoderRanked(x *formats.COO, rank func(mode int) formats.Ranks) *Encoder {
	e := NewEncoder(x)
	e.rank = rank
	return e
}

// modeRanks returns mode's ranks, made on first use.
func (e *Encoder) modeRanks(mode int) *modeRanks {
	mr := &e.ranks[mode]
	mr.once.Do(func() {
		if e.rank != nil {
			if r := e.rank(mode); len(r.Of) == e.x.NNZ() {
				mr.r, mr.bad = r, -1
				return
			}
		}
		mr.r, mr.bad = formats.RankIndices(e.x.Inds[mode], e.x.Dims[mode])
	})
	return mr
}

// assignment returns the node assignment of mode's ranks r at the
// budget, made on first use.
func (e *Encoder) assignment(mode, budget int, r formats.Ranks) *nodeAssignment {
	e.mu.Lock()
	a, ok := e.nodes[[2]int{mode, budget}]
	if !ok {
		a = &nodeAssignment{}
		e.nodes[[2]int{mode, budget}] = a
	}
	e.mu.Unlock()
	a.once.Do(func() {
		a.first = nodeFirsts(r.N, budget)
		a.ofRank = warm.Uint32s(r.N)
		for b := range len(a.first) - 1 {
			for k := a.first[b]; k < a.first[b+1]; k++ {
				a.ofRank[k] = uint32(b)
			}
		}
	})
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
	if b.Rows == b.Cols {
		e.mu.Lock()
		t, ok := e.graphs[graphKey{Shape{Rows: shape.Cols, Cols: shape.Rows}, b}]
		e.mu.Unlock()
		if ok {
			return t.transpose(), nil
		}
	}
	g, err := e.encode(shape, b)
	if err == nil && b.Rows == b.Cols {
		e.mu.Lock()
		e.graphs[graphKey{shape, b}] = g
		e.mu.Unlock()
	}
	return g, err
}

// transpose returns g's graph with rows and columns swapped: the graph of
// the transposed shape. g's budget must be square.
func (g *Graph) transpose() *Graph {
	n := g.Budget.Rows
	t := &Graph{Shape: Shape{Rows: g.Shape.Cols, Cols: g.Shape.Rows}, Budget: g.Budget,
		Dims: [2]int{g.Dims[1], g.Dims[0]}, NNZ: g.NNZ,
		RowNodes: g.ColNodes, ColNodes: g.RowNodes, NonEmptyRows: g.NonEmptyCols, NonEmptyCols: g.NonEmptyRows,
		Exact: g.Exact, RowFirst: slices.Clone(g.ColFirst), ColFirst: slices.Clone(g.RowFirst),
		Adj: make([]float32, len(g.Adj)), RowFeat: slices.Clone(g.ColFeat), ColFeat: slices.Clone(g.RowFeat),
		RowMask: slices.Clone(g.ColMask), ColMask: slices.Clone(g.RowMask), Weights: make([]uint64, len(g.Weights))}
	for r := range n {
		for c := range n {
			t.Adj[c*n+r], t.Weights[c*n+r] = g.Adj[r*n+c], g.Weights[r*n+c]
		}
	}
	return t
}

// encode is Encode's pass over the nonzeros.
func (e *Encoder) encode(shape Shape, b Budget) (*Graph, error) {
	x := e.x
	ri, ci := x.Inds[shape.Rows], x.Inds[shape.Cols]
	nnz := x.NNZ()
	dr, dc := x.Dims[shape.Rows], x.Dims[shape.Cols]
	g := &Graph{Shape: shape, Budget: b, Dims: [2]int{dr, dc}, NNZ: nnz,
		Adj: warm.Float32s(b.Rows * b.Cols), RowFeat: warm.Float32s(b.Rows * NodeFeatures),
		ColFeat: warm.Float32s(b.Cols * NodeFeatures), RowMask: warm.Float32s(b.Rows), ColMask: warm.Float32s(b.Cols),
		Weights: warm.Uint64s(b.Rows * b.Cols)}

	// Pass 1: the rank of every nonzero's row and column among the
	// non-empty ones (checking the indices), and the node of each rank.
	rr, cr := e.modeRanks(shape.Rows), e.modeRanks(shape.Cols)
	for _, mr := range []*modeRanks{rr, cr} {
		if mr.bad >= 0 {
			return nil, fmt.Errorf("graph encoding: nonzero %d has index beyond the dims", mr.bad+1)
		}
	}
	ra, ca := e.assignment(shape.Rows, b.Rows, rr.r), e.assignment(shape.Cols, b.Cols, cr.r)
	// The assignments are only read; the graph gets its own bucket bounds.
	g.RowFirst, g.NonEmptyRows = slices.Clone(ra.first), rr.r.N
	g.ColFirst, g.NonEmptyCols = slices.Clone(ca.first), cr.r.N
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
		// The first worker counts the edges into the graph's own
		// weights (laid out by the budget): for a one-worker sample,
		// no partial sums to allocate and copy.
		pt := part{w: g.Weights, rows: newNodeStats(g.RowNodes), cols: newNodeStats(g.ColNodes)}
		if p > 0 {
			pt.w = warm.Uint64s(len(g.Weights))
		}
		lo, hi := p*nnz/workers, (p+1)*nnz/workers
		edges(pt.w, pt.rows, pt.cols, b.Cols, ri[lo:hi], ci[lo:hi], rr.r.Of[lo:hi], cr.r.Of[lo:hi], ra.ofRank, ca.ofRank)
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
	// the cells: their entries are computed once each.
	var adjOf [64]float32
	var adjSet [64]bool
	lw := math.Log1p(float64(wmax))
	for r := range g.RowNodes {
		for c := range g.ColNodes {
			v := w[r*b.Cols+c]
			if v == 0 {
				continue
			}
			if v < uint64(len(adjOf)) {
				if !adjSet[v] {
					adjOf[v], adjSet[v] = float32(math.Log1p(float64(v))/lw), true
				}
				g.Adj[r*b.Cols+c] = adjOf[v]
				continue
			}
			g.Adj[r*b.Cols+c] = float32(math.Log1p(float64(v)) / lw)
		}
	}
	// Every node's first feature divides by the same log1p(nnz).
	logNNZ := math.Log1p(float64(max(nnz, 1)))
	for r := range g.RowNodes {
		g.RowMask[r] = 1
		rows[r].features(g.RowFeat[r*NodeFeatures:(r+1)*NodeFeatures], logNNZ, dc)
	}
	for c := range g.ColNodes {
		g.ColMask[c] = 1
		cols[c].features(g.ColFeat[c*NodeFeatures:(c+1)*NodeFeatures], logNNZ, dr)
	}
	return g, nil
}

// edges adds the nonzeros with row and column indices ri and ci, of
// ranks rowRank and colRank, to the edge weights w and the node
// statistics; rowOf and colOf map a rank to its node, and the weight of
// the edge (r, c) is w[r*stride+c].
func edges(w []uint64, rows, cols []nodeStats, stride int, ri, ci, rowRank, colRank, rowOf, colOf []uint32) {
	ci, rowRank, colRank = ci[:len(ri)], rowRank[:len(ri)], colRank[:len(ri)]
	for k, i := range ri {
		j := ci[k]
		r, c := rowOf[rowRank[k]], colOf[colRank[k]]
		w[int(r)*stride+int(c)]++
		rows[r].add(j)
		cols[c].add(i)
	}
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
