package graphenc

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

func coo(t *testing.T, dims []int, nz [][]uint32) *formats.COO {
	t.Helper()
	x, err := formats.NewCOO(dims, len(nz))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range nz {
		x.Append(c, 1)
	}
	return x
}

func near(a float32, b float64) bool { return math.Abs(float64(a)-b) < 1e-6 }

// TestEncodeByHand checks a 3x4x2 tensor lowered for SpTTM along mode 2
// (1-based), worked out on paper: the slicing mode is mode 1, so the
// mapping matrix is mode 3 (rows) by mode 2 (columns).
func TestEncodeByHand(t *testing.T) {
	x := coo(t, []int{3, 4, 2}, [][]uint32{{0, 0, 0}, {1, 0, 0}, {2, 3, 1}, {0, 3, 1}, {1, 1, 0}})
	shape := SpTTMShape(3, 1)
	if shape != (Shape{Rows: 2, Cols: 1}) {
		t.Fatalf("shape %+v", shape)
	}
	g, err := Encode(x, shape, DefaultBudget)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Exact || g.RowNodes != 2 || g.ColNodes != 3 || g.NonEmptyRows != 2 || g.NonEmptyCols != 3 {
		t.Fatalf("nodes %d x %d exact %v", g.RowNodes, g.ColNodes, g.Exact)
	}
	B := DefaultBudget.Cols
	// Mapping matrix (k, j): (0,0)=2, (0,1)=1, (1,3)=2; column j=3 is node 2.
	wantW := map[[2]int]uint64{{0, 0}: 2, {0, 1}: 1, {1, 2}: 2}
	for r := range 2 {
		for c := range 3 {
			if g.Weights[r*B+c] != wantW[[2]int{r, c}] {
				t.Errorf("weight (%d,%d) = %d, want %d", r, c, g.Weights[r*B+c], wantW[[2]int{r, c}])
			}
		}
	}
	if !near(g.Adj[0*B+0], 1) || !near(g.Adj[0*B+1], math.Log(2)/math.Log(3)) || !near(g.Adj[1*B+2], 1) || g.Adj[1*B+0] != 0 {
		t.Errorf("adj %v %v %v %v", g.Adj[0], g.Adj[1], g.Adj[B+2], g.Adj[B])
	}
	l6 := math.Log(6)
	wantRows := [][]float64{
		{math.Log(4) / l6, 1.0 / 3, 0, 1.0 / 9, 8.0 / 81}, // k=0: j in {0,0,1} of dim 4
		{math.Log(3) / l6, 1, 1, 1, 0},                    // k=1: j in {3,3}
	}
	wantCols := [][]float64{
		{math.Log(3) / l6, 0, 0, 0, 0}, // j=0: k in {0,0} of dim 2
		{math.Log(2) / l6, 0, 0, 0, 0}, // j=1: k=0
		{math.Log(3) / l6, 1, 1, 1, 0}, // j=3: k in {1,1}
	}
	check := func(side string, got []float32, want [][]float64) {
		for i, w := range want {
			for f, v := range w {
				if !near(got[i*NodeFeatures+f], v) {
					t.Errorf("%s node %d feature %d = %v, want %v", side, i, f, got[i*NodeFeatures+f], v)
				}
			}
		}
	}
	check("row", g.RowFeat, wantRows)
	check("col", g.ColFeat, wantCols)
	if !slices.Equal(g.RowMask[:3], []float32{1, 1, 0}) || !slices.Equal(g.ColMask[:4], []float32{1, 1, 1, 0}) {
		t.Errorf("masks %v %v", g.RowMask[:3], g.ColMask[:4])
	}

	// The same tensor in a 1 x 2 budget: all rows in one bucket; columns
	// {j=0} and {j=1, j=3}.
	h, err := Encode(x, shape, Budget{Rows: 1, Cols: 2})
	if err != nil {
		t.Fatal(err)
	}
	if h.Exact || h.RowNodes != 1 || h.ColNodes != 2 || h.Weights[0] != 2 || h.Weights[1] != 3 {
		t.Fatalf("bucketed: exact %v nodes %dx%d weights %v", h.Exact, h.RowNodes, h.ColNodes, h.Weights)
	}
	// Column bucket 1 holds k in {0, 1, 1}: mean 2/3, variance 2/9.
	if f := h.ColFeat[NodeFeatures:]; !near(f[0], math.Log(4)/l6) || !near(f[1], 1) || !near(f[2], 0) || !near(f[3], 2.0/3) || !near(f[4], 8.0/9) {
		t.Errorf("bucket features %v", f)
	}
}

// randomTensor returns a tensor with nnz random nonzeros.
func randomTensor(rng *rand.Rand, dims []int, nnz int) *formats.COO {
	x, _ := formats.NewCOO(dims, nnz)
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, rng.Float32())
	}
	return x
}

// naiveMapping counts the mapping matrix by definition.
func naiveMapping(x *formats.COO, s Shape) map[[2]uint32]uint64 {
	m := map[[2]uint32]uint64{}
	for k := range x.NNZ() {
		m[[2]uint32{x.Inds[s.Rows][k], x.Inds[s.Cols][k]}]++
	}
	return m
}

// TestEncodeInvariants: exact under budget (weights are the mapping
// matrix), totals conserved under bucketing, unchanged by permuting the
// slices or scaling the values, and deterministic across thread counts.
func TestEncodeInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dims := range [][]int{{40, 30}, {50, 60, 20}, {30, 20, 10, 15}, {300, 400, 500}} {
		x := randomTensor(rng, dims, 200000)
		for mode := range len(dims) {
			for _, shape := range []Shape{SpTTMShape(len(dims), mode), MTTKRPShape(dims, mode)} {
				for _, b := range []Budget{{Rows: 1000, Cols: 1000}, {Rows: 16, Cols: 7}, DefaultBudget} {
					g, err := Encode(x, shape, b)
					if err != nil {
						t.Fatal(err)
					}
					var total uint64
					for _, w := range g.Weights {
						total += w
					}
					if total != uint64(x.NNZ()) {
						t.Fatalf("dims %v shape %+v budget %+v: weights sum to %d, want %d", dims, shape, b, total, x.NNZ())
					}
					if g.RowNodes > b.Rows || g.ColNodes > b.Cols {
						t.Fatalf("nodes %dx%d beyond budget %+v", g.RowNodes, g.ColNodes, b)
					}
					if g.Exact {
						checkExact(t, x, g)
					}
				}
			}
		}
	}
}

func checkExact(t *testing.T, x *formats.COO, g *Graph) {
	t.Helper()
	want := naiveMapping(x, g.Shape)
	// Node i is the i-th non-empty index.
	rowIdx, colIdx := nonEmpty(x.Inds[g.Shape.Rows], g.Dims[0]), nonEmpty(x.Inds[g.Shape.Cols], g.Dims[1])
	for r, a := range rowIdx {
		for c, b := range colIdx {
			if got := g.Weights[r*g.Budget.Cols+c]; got != want[[2]uint32{a, b}] {
				t.Fatalf("weight of (%d,%d) = %d, want %d", a, b, got, want[[2]uint32{a, b}])
			}
		}
	}
}

func nonEmpty(ind []uint32, dim int) []uint32 {
	seen := make([]bool, dim)
	for _, i := range ind {
		seen[i] = true
	}
	var out []uint32
	for i, s := range seen {
		if s {
			out = append(out, uint32(i))
		}
	}
	return out
}

func TestEncodeSlicePermutationAndValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := randomTensor(rng, []int{50, 40, 30}, 100000)
	for mode := range 3 {
		shape := SpTTMShape(3, mode)
		g, err := Encode(x, shape, Budget{Rows: 20, Cols: 25})
		if err != nil {
			t.Fatal(err)
		}
		// Permute the slicing mode's indices and scale the values.
		y := x.Clone()
		slice := formats.DefaultSliceMode(mode)
		perm := rng.Perm(x.Dims[slice])
		for k := range y.Inds[slice] {
			y.Inds[slice][k] = uint32(perm[y.Inds[slice][k]])
		}
		for k := range y.Vals {
			y.Vals[k] *= -3.5
		}
		h, err := Encode(y, shape, Budget{Rows: 20, Cols: 25})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Adj, h.Adj) || !slices.Equal(g.RowFeat, h.RowFeat) || !slices.Equal(g.ColFeat, h.ColFeat) {
			t.Fatalf("mode %d: slice permutation or value scaling changed the graph", mode)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	x := coo(t, []int{3, 4, 2}, [][]uint32{{0, 0, 0}})
	for _, tc := range []struct {
		s Shape
		b Budget
	}{
		{Shape{0, 0}, DefaultBudget},
		{Shape{0, 3}, DefaultBudget},
		{Shape{-1, 1}, DefaultBudget},
		{Shape{0, 1}, Budget{0, 5}},
	} {
		if _, err := Encode(x, tc.s, tc.b); err == nil {
			t.Errorf("shape %+v budget %+v accepted", tc.s, tc.b)
		}
	}
}

func TestFeaturesInRange(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "tensors", "*.tns"))
	if len(paths) == 0 {
		t.Skip("no shared tensors: skipping")
	}
	for _, p := range paths {
		x, err := formats.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for mode := range x.Order() {
			for _, shape := range []Shape{SpTTMShape(x.Order(), mode), MTTKRPShape(x.Dims, mode)} {
				g, err := Encode(x, shape, DefaultBudget)
				if err != nil {
					t.Fatal(err)
				}
				for _, arr := range [][]float32{g.Adj, g.RowFeat, g.ColFeat} {
					for _, v := range arr {
						if !(v >= 0 && v <= 1) {
							t.Fatalf("%s mode %d: value %v outside [0, 1]", filepath.Base(p), mode+1, v)
						}
					}
				}
			}
		}
	}
}

// BenchmarkEncode reports nonzeros per second on a generated 10M-nonzero
// tensor and on the shared tensor with the most nonzeros (kg_wn18).
func BenchmarkEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	type input struct {
		name string
		x    *formats.COO
	}
	inputs := []input{{"generated10M", randomTensor(rng, []int{100000, 50000, 2000}, 10_000_000)}}
	if x, err := formats.ReadFile(filepath.Join("..", "..", "shared", "data", "tensors", "kg_wn18.tns")); err == nil {
		inputs = append(inputs, input{"kg_wn18", x})
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			shape := SpTTMShape(3, 1)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(in.x, shape, DefaultBudget); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(in.x.NNZ())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mnnz/s")
		})
	}
}

// BenchmarkEncodeSample encodes the graph of a prediction's sample (1,024
// nonzeros, features.MinSample) through one Encoder, its ranks and nodes
// made once: the part of a decision by the network that the graph costs.
func BenchmarkEncodeSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dims := range [][]int{{900, 900, 47, 47}, {40000, 30000, 500}} {
		x := randomTensor(rng, dims, 1024)
		x.Sort() // a sample keeps the tensor's order: often sorted
		e := NewEncoder(x)
		shape := Shape{Rows: len(dims) - 1, Cols: 0}
		b.Run(fmt.Sprint(dims), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Encode(shape, DefaultBudget); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An encoder handed ranks encodes the graphs of one that ranks for
// itself; ranks of the wrong length are ignored.
func TestEncoderRanked(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomTensor(rng, []int{40, 1 << 28, 7}, 3000)
	ranks := make([]formats.Ranks, x.Order())
	for m := range ranks {
		ranks[m], _ = formats.RankIndices(x.Inds[m], x.Dims[m])
	}
	ranks[2] = formats.Ranks{Of: []uint32{0}, N: 1}
	e := NewEncoderRanked(x, func(m int) formats.Ranks { return ranks[m] })
	for _, sh := range []Shape{{0, 1}, {1, 2}, {2, 0}} {
		got, err := e.Encode(sh, Budget{Rows: 16, Cols: 8})
		if err != nil {
			t.Fatal(err)
		}
		want, err := Encode(x, sh, Budget{Rows: 16, Cols: 8})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shape %v: the ranked encoder's graph differs from Encode's", sh)
		}
	}
}

// TestEncoderSharesNodes holds an Encoder that serves every shape of a
// tensor, concurrently, to Encode of each shape alone.
func TestEncoderSharesNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	x := randomTensor(rng, []int{40, 3000, 7, 90}, 5000)
	e := NewEncoder(x)
	var shapes []Shape
	for r := range 4 {
		for c := range 4 {
			if r != c {
				shapes = append(shapes, Shape{Rows: r, Cols: c})
			}
		}
	}
	// A square budget also serves transposed shapes from each other.
	for _, b := range []Budget{{Rows: 16, Cols: 8}, {Rows: 16, Cols: 16}} {
		got := make([]*Graph, len(shapes))
		var wg sync.WaitGroup
		for i, sh := range shapes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], _ = e.Encode(sh, b)
			}()
		}
		wg.Wait()
		for i, sh := range shapes {
			want, err := Encode(x, sh, b)
			if err != nil {
				t.Fatal(err)
			}
			if got[i] == nil || !reflect.DeepEqual(got[i], want) {
				t.Fatalf("budget %v, shape %v: the shared encoder's graph differs from Encode's", b, sh)
			}
		}
	}
}

// TestEncoderTransposes checks the graph of a transposed shape, made
// from the kept graph without a pass, against Encode's.
func TestEncoderTransposes(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	x := randomTensor(rng, []int{300, 50, 7}, 4000)
	b := Budget{Rows: 16, Cols: 16}
	e := NewEncoder(x)
	for _, sh := range []Shape{{0, 1}, {1, 0}, {2, 0}, {0, 2}} {
		got, err := e.Encode(sh, b)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Encode(x, sh, b)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shape %v: the transposed graph differs from Encode's", sh)
		}
	}
	if len(e.graphs) != 2 {
		t.Errorf("the encoder kept %d graphs, want 2: the transposed shapes were encoded again", len(e.graphs))
	}
}

// The nodes' statistics (Graph's features 0-4) against sums by
// definition, in big integers, on dims up to 2^32, where the sums of
// squares of a node's indices outgrow a word.
func TestNodeStatsByDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	type input struct {
		dims []int
		nnz  int
	}
	inputs := []input{
		{[]int{1000, 700, 30}, 20000},
		{[]int{1 << 28, 5000, 40}, 9000},
		{[]int{3, 1 << 30, 1}, 5000},
	}
	if strconv.IntSize == 64 {
		// Dims of 2^31 and 2^32-1: an int holds them here.
		shift := 31
		inputs = append(inputs, input{[]int{1 << shift, 1<<(shift+1) - 1, 9}, 3000})
	}
	for _, c := range inputs {
		x := randomTensor(rng, c.dims, c.nnz)
		for m := range c.dims { // the largest index of every mode
			idx := make([]uint32, len(c.dims))
			idx[m] = uint32(c.dims[m] - 1)
			x.Append(idx, 1)
		}
		for mode := range c.dims {
			shape := MTTKRPShape(c.dims, mode)
			for _, b := range []Budget{{Rows: 16, Cols: 7}, DefaultBudget} {
				g, err := Encode(x, shape, b)
				if err != nil {
					t.Fatal(err)
				}
				rows := naiveNodeStats(x, shape.Rows, shape.Cols, g.RowFirst)
				cols := naiveNodeStats(x, shape.Cols, shape.Rows, g.ColFirst)
				for _, side := range []struct {
					name  string
					stats []nodeStats
					got   []float32
					dim   int
				}{{"row", rows, g.RowFeat, g.Dims[1]}, {"col", cols, g.ColFeat, g.Dims[0]}} {
					for n := range side.stats {
						want := make([]float32, NodeFeatures)
						side.stats[n].features(want, math.Log1p(float64(max(x.NNZ(), 1))), side.dim)
						if got := side.got[n*NodeFeatures : (n+1)*NodeFeatures]; !slices.Equal(got, want) {
							t.Fatalf("dims %v shape %+v budget %+v: %s node %d: features %v, want %v", c.dims, shape, b, side.name, n, got, want)
						}
					}
				}
			}
		}
	}
}

// naiveNodeStats sums, for each node of mode a (node n holding the
// non-empty indices of ranks first[n] to first[n+1]-1), the indices of
// mode b of its nonzeros, in big integers.
func naiveNodeStats(x *formats.COO, a, b int, first []int) []nodeStats {
	set := map[uint32]bool{}
	for _, i := range x.Inds[a] {
		set[i] = true
	}
	sorted := slices.Sorted(maps.Keys(set))
	nodes := len(first) - 1
	n := make([]uint64, nodes)
	sum, sq := make([]*big.Int, nodes), make([]*big.Int, nodes)
	lo, hi := make([]uint32, nodes), make([]uint32, nodes)
	for k := range nodes {
		sum[k], sq[k], lo[k] = new(big.Int), new(big.Int), math.MaxUint32
	}
	for k, i := range x.Inds[a] {
		rank, _ := slices.BinarySearch(sorted, i)
		node, found := slices.BinarySearch(first, rank)
		if !found {
			node--
		}
		j := x.Inds[b][k]
		v := new(big.Int).SetUint64(uint64(j))
		n[node]++
		sum[node].Add(sum[node], v)
		sq[node].Add(sq[node], v.Mul(v, v))
		lo[node], hi[node] = min(lo[node], j), max(hi[node], j)
	}
	out := make([]nodeStats, nodes)
	mask := new(big.Int).SetUint64(math.MaxUint64)
	for k := range out {
		out[k] = nodeStats{n: n[k], sum: sum[k].Uint64(), min: lo[k], max: hi[k],
			sqLo: new(big.Int).And(sq[k], mask).Uint64(), sqHi: new(big.Int).Rsh(sq[k], 64).Uint64()}
	}
	return out
}

// TestAdjByDefinition: every adjacency entry is log1p of its weight over
// log1p of the largest, to the bit, for small weights (looked up once
// per weight) and large ones alike; empty cells are 0.
func TestAdjByDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dims := range [][]int{{4, 4, 1000}, {900, 900, 47}, {40, 3, 60}} {
		x := randomTensor(rng, dims, 3000)
		g, err := Encode(x, Shape{Rows: 0, Cols: 1}, DefaultBudget)
		if err != nil {
			t.Fatal(err)
		}
		wmax, large := uint64(0), 0
		for _, w := range g.Weights {
			wmax = max(wmax, w)
			if w >= 64 {
				large++
			}
		}
		for k, w := range g.Weights {
			want := float32(0)
			if w > 0 {
				want = float32(math.Log1p(float64(w)) / math.Log1p(float64(wmax)))
			}
			if g.Adj[k] != want {
				t.Fatalf("dims %v: cell %d of weight %d: %v, by definition %v", dims, k, w, g.Adj[k], want)
			}
		}
		if dims[0] == 4 && large == 0 {
			t.Errorf("dims %v: no weight of 64 or more: the test misses the large weights", dims)
		}
	}
}
