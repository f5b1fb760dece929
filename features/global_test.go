package features

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

func coo(t testing.TB, dims []int, nz [][]uint32) *formats.COO {
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

// handTensor is a 3x4x2 tensor whose features are worked out below.
func handTensor(t testing.TB) *formats.COO {
	return coo(t, []int{3, 4, 2}, [][]uint32{{0, 0, 0}, {0, 1, 0}, {0, 1, 1}, {2, 3, 1}, {2, 0, 0}})
}

// TestGlobalByHand checks mode 1 (0 here) of handTensor, by hand.
// Slices of mode 1: i=0 holds 3 nonzeros, i=2 holds 2, i=1 none.
// Fibers of mode 1, keyed (j,k): (0,0) 2, (1,0) 1, (1,1) 1, (3,1) 1.
// SpTTM's rows are those fibers; MTTKRP's rows the slices.
func TestGlobalByHand(t *testing.T) {
	x := handTensor(t)
	l := math.Log10
	fiberStd := math.Sqrt(1.75 - 1.25*1.25)
	common := map[Feature]float64{
		Order: 3, LogNNZ: l(5), LogDensity: l(5.0 / 24), LogMaxDim: l(4), LogMinDim: l(2), LogMeanDim: l(3), LogModeDim: l(3),
		LogSlices: l(2), LogFibers: l(4),
		LogSliceNNZMean: l(2.5), LogSliceNNZStd: l(1.5), LogSliceNNZMax: l(3), LogSliceNNZCV: l(1.2),
		LogFiberNNZMean: l(1.25), LogFiberNNZStd: l(1 + fiberStd), LogFiberNNZMax: l(2), LogFiberNNZCV: l(1 + fiberStd/1.25),
		EmptySlices: 1.0 / 3,
	}
	tests := []struct {
		op   hetero.Op
		want map[Feature]float64
	}{
		// SpTTM: mapping-matrix rows are mode 3 (both k present). Fiber
		// lengths 2,1,1,1: ELL width 1 (mean 1.25) has no padding, width
		// 2 holds 5 of 8 slots; HYB width 1 (3 of 4 rows have at most 1)
		// leaves 1 nonzero over.
		{hetero.SpTTM, map[Feature]float64{EmptyRows: 0, ELLPadMean: 0, ELLPadMax: 3.0 / 8, LogELLSlots: l(8.0 / 5), HYBCOOFraction: 1.0 / 5}},
		// MTTKRP: mapping-matrix rows are mode 1 (i=1 empty). Slice
		// lengths 3,2: width 3 (mean 2.5 rounded) holds 5 of 6 slots; HYB
		// width 2 leaves 1.
		{hetero.MTTKRP, map[Feature]float64{EmptyRows: 1.0 / 3, ELLPadMean: 1.0 / 6, ELLPadMax: 1.0 / 6, LogELLSlots: l(6.0 / 5), HYBCOOFraction: 1.0 / 5}},
	}
	for _, tc := range tests {
		v, err := Global(x, tc.op, 0)
		if err != nil {
			t.Fatal(err)
		}
		for f := range Feature(Count) {
			want, ok := tc.want[f]
			if !ok {
				want = common[f]
			}
			if math.Abs(v[f]-want) > 1e-12 {
				t.Errorf("%v %v = %v, want %v", tc.op, f, v[f], want)
			}
		}
	}
}

func randomTensor(rng *rand.Rand, dims []int, nnz int, skew bool) *formats.COO {
	x, _ := formats.NewCOO(dims, nnz)
	c := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			if skew {
				// Power-law-ish: squaring a uniform variable crowds the low indices.
				u := rng.Float64()
				c[m] = uint32(u * u * float64(d))
			} else {
				c[m] = uint32(rng.IntN(d))
			}
		}
		x.Append(c, rng.Float32())
	}
	return x
}

// TestGlobalInvariants checks that what does not change the structure
// does not change the features: values, the order of the nonzeros, a
// permutation of the mode's slices, and the number of threads.
func TestGlobalInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		dims []int
		nnz  int
	}{{[]int{50, 40, 30}, 3000}, {[]int{300, 200}, 5000}, {[]int{20, 30, 10, 8}, 4000}, {[]int{2000, 3000, 500}, 400_000}} {
		x := randomTensor(rng, tc.dims, tc.nnz, true)
		for _, op := range hetero.Ops {
			for mode := range x.Order() {
				want, err := Global(x, op, mode)
				if err != nil {
					t.Fatal(err)
				}
				check := func(what string, y *formats.COO) {
					t.Helper()
					got, err := Global(y, op, mode)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("%v %v mode %d: %s changed the features\n got %v\nwant %v", tc.dims, op, mode+1, what, got, want)
					}
				}
				y := x.Clone()
				for k := range y.Vals {
					y.Vals[k] *= -3.5
				}
				check("scaling values", y)

				y = x.Clone()
				perm := rng.Perm(y.NNZ())
				if x.NNZ() > ExactNNZ {
					// A sample is taken at fixed positions: shuffling
					// changes it (TestSampledEstimates bounds by how much).
					perm = nil
				}
				for m := range y.Inds {
					ind := make([]uint32, len(perm))
					for k, p := range perm {
						ind[k] = y.Inds[m][p]
					}
					y.Inds[m] = ind
				}
				if perm != nil {
					check("shuffling nonzeros", y)
				}

				y = x.Clone()
				sp := rng.Perm(y.Dims[mode])
				for k, i := range y.Inds[mode] {
					y.Inds[mode][k] = uint32(sp[i])
				}
				check("permuting slices", y)

				prev := runtime.GOMAXPROCS(1)
				check("one thread", x)
				runtime.GOMAXPROCS(prev)
			}
		}
	}
}

func TestGlobalErrors(t *testing.T) {
	x := handTensor(t)
	bad := x.Clone()
	bad.Inds[1][2] = 9
	short := x.Clone()
	short.Inds[2] = short.Inds[2][:3]
	for _, tc := range []struct {
		x    *formats.COO
		op   hetero.Op
		mode int
		want string
	}{
		{x, hetero.SpTTM, 3, "mode 4 out of range"},
		{x, hetero.Op(9), 0, "unknown op"},
		{bad, hetero.SpTTM, 0, "nonzero 3 has an index beyond the dims"},
		{short, hetero.MTTKRP, 0, "mode 3 has 3 indices for 5 values"},
	} {
		_, err := Global(tc.x, tc.op, tc.mode)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}

// checkRanges reports the features outside Ranges or not finite.
func checkRanges(t *testing.T, what string, v Vector) {
	t.Helper()
	for f := range Feature(Count) {
		if r := Ranges[f]; math.IsNaN(v[f]) || v[f] < r[0] || v[f] > r[1] {
			t.Errorf("%s: %v = %v outside [%v, %v]", what, f, v[f], r[0], r[1])
		}
	}
}

// TestGlobalRealData checks every shared tensor, op and mode: all features
// finite and in range.
func TestGlobalRealData(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "tensors", "*.tns"))
	if len(paths) == 0 {
		t.Skip("no shared tensors in ../shared/data/tensors: skipping")
	}
	for _, p := range paths {
		x, err := formats.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range hetero.Ops {
			for mode := range x.Order() {
				v, err := Global(x, op, mode)
				if err != nil {
					t.Fatal(err)
				}
				checkRanges(t, filepath.Base(p), v)
			}
		}
	}
}

func TestGlobalEdgeCases(t *testing.T) {
	cases := []*formats.COO{
		coo(t, []int{1, 1}, nil),
		coo(t, []int{1, 1}, [][]uint32{{0, 0}}),
		coo(t, []int{formats.MaxDim, 3, formats.MaxDim}, [][]uint32{{formats.MaxDim - 1, 2, 0}, {0, 0, formats.MaxDim - 1}}),
	}
	if strconv.IntSize == 64 {
		// Dims past int32, as a 64-bit int holds them; the literal 1 << 31
		// would not compile for 32-bit targets.
		const w31 = 1 << (strconv.IntSize/2 - 1)
		cases = append(cases, coo(t, []int{w31, w31, w31, w31}, [][]uint32{{1, 2, 3, 4}, {1, 2, 3, 5}}))
	}
	for _, x := range cases {
		for _, op := range hetero.Ops {
			for mode := range x.Order() {
				v, err := Global(x, op, mode)
				if err != nil {
					t.Fatal(err)
				}
				checkRanges(t, "edge case", v)
			}
		}
	}
}

// BenchmarkGlobal reports nonzeros per second on a generated 10M-nonzero
// tensor and on the shared tensor with the most nonzeros (kg_wn18).
func BenchmarkGlobal(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	inputs := []struct {
		name string
		x    *formats.COO
	}{{"generated10M", randomTensor(rng, []int{100000, 50000, 2000}, 10_000_000, true)}}
	if x, err := formats.ReadFile(filepath.Join("..", "..", "shared", "data", "tensors", "kg_wn18.tns")); err == nil {
		inputs = append(inputs, struct {
			name string
			x    *formats.COO
		}{"kg_wn18", x})
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Global(in.x, hetero.SpTTM, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(in.x.NNZ())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mnnz/s")
		})
	}
}

// TestSampledEstimates holds a sampled summary's features to the exact
// ones on tensors past ExactNNZ: the shared tensors that large, and
// generated tensors of a million nonzeros, uniform and skewed. Nonzeros,
// dims and density stay exact. Slice statistics, whose groups hold many
// sampled nonzeros, are bounded (in decades for the log features). Fiber
// statistics are not: when fibers are shorter than the sampling stride
// (256), a sample cannot tell many short fibers from fewer longer ones,
// so they are features of the sample, which the model is trained on, not
// estimates (docs/model.md, "Prediction cost").
func TestSampledEstimates(t *testing.T) {
	bounds := map[Feature]float64{
		Order: 0, LogNNZ: 0, LogDensity: 0, LogMaxDim: 0, LogMinDim: 0, LogMeanDim: 0, LogModeDim: 0,
		LogSlices: 0.3, LogSliceNNZMean: 0.3, LogSliceNNZMax: 0.45, LogSliceNNZCV: 0.3, EmptySlices: 0.45,
	}
	type input struct {
		name string
		x    *formats.COO
	}
	var inputs []input
	rng := rand.New(rand.NewPCG(7, 8))
	if !testing.Short() {
		inputs = append(inputs, input{"uniform 1M", randomTensor(rng, []int{5000, 4000, 300}, 1_000_000, false)},
			input{"skewed 1M", randomTensor(rng, []int{3000, 3000, 3000}, 1_000_000, true)})
	}
	paths, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "tensors", "*.tns"))
	for _, p := range paths {
		x, err := formats.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if x.NNZ() > ExactNNZ {
			inputs = append(inputs, input{filepath.Base(p), x})
		}
	}
	if len(inputs) == 0 {
		t.Skip("no tensor past ExactNNZ: ../shared/data/tensors absent and -short")
	}
	for _, in := range inputs {
		s, err := Summarize(in.x)
		if err != nil {
			t.Fatal(err)
		}
		if s.Exact || s.Sample.NNZ() != SampleNNZ(in.x.NNZ()) {
			t.Fatalf("%s: exact %v, sample of %d", in.name, s.Exact, s.Sample.NNZ())
		}
		e, err := SummarizeExact(in.x)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range hetero.Ops {
			for mode := range in.x.Order() {
				got, err := s.Global(op, mode)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := e.Global(op, mode)
				checkRanges(t, in.name, got)
				for f, bound := range bounds {
					if d := math.Abs(got[f] - want[f]); d > bound+1e-12 {
						t.Errorf("%s %v mode %d: %v = %.4f, exact %.4f (bound %.2f)", in.name, op, mode+1, f, got[f], want[f], bound)
					}
				}
			}
		}
	}
}

// Prepare and concurrent Global calls give what one mode at a time gives.
func TestSummaryConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := randomTensor(rng, []int{3000, 200, 70000, 9}, 300_000, true)
	want := map[[2]int]Vector{}
	seq, err := Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range hetero.Ops {
		for m := range x.Order() {
			want[[2]int{int(op), m}], _ = seq.Global(op, m)
		}
	}
	for _, prepare := range [][]hetero.Op{nil, {}, {hetero.MTTKRP}, {hetero.SpTTM}} {
		s, _ := Summarize(x)
		if prepare != nil {
			s.Prepare(prepare...)
		}
		if len(prepare) == 1 && prepare[0] == hetero.MTTKRP {
			// MTTKRP reads the fibers of the last two modes only.
			for m, f := range s.fibers {
				if counted := f != nil; counted != (m >= 2) {
					t.Errorf("Prepare(mttkrp): mode %d fibers counted %v", m+1, counted)
				}
			}
		}
		var wg sync.WaitGroup
		for _, op := range hetero.Ops {
			for m := range x.Order() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := s.Global(op, m)
					if err != nil || got != want[[2]int{int(op), m}] {
						t.Errorf("prepare %v, %v mode %d: %v, %v; sequential %v", prepare, op, m+1, got, err, want[[2]int{int(op), m}])
					}
				}()
			}
		}
		wg.Wait()
	}
}

// The sample's positions are the hashed draws in increasing order, for
// any size: the bucket sort must give what sorting them gives.
func TestSamplePositions(t *testing.T) {
	for _, c := range []struct{ nnz, n int }{
		{2, 1}, {100, 99}, {70000, 16384}, {1 << 20, 2048}, {3_000_001, 2048}, {min(1<<40, math.MaxInt), 16384},
	} {
		got := samplePositions(c.nnz, make([]uint64, 3*c.n))
		want := make([]uint64, c.n)
		for k := range want {
			want[k], _ = bits.Mul64(mix(uint64(k)+0x9e3779b97f4a7c15), uint64(c.nnz))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("nnz %d, n %d: positions differ from the sorted draws", c.nnz, c.n)
		}
		if got[len(got)-1] >= uint64(c.nnz) {
			t.Errorf("nnz %d, n %d: position %d out of range", c.nnz, c.n, got[len(got)-1])
		}
	}
}

// Counting keys in a table gives the counts sorting them gives, as a
// multiset: few distinct keys, all distinct, keys at the width's limit.
func TestTableCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, distinct int }{{1, 1}, {5, 1}, {2048, 7}, {2048, 2048}, {3000, 900}, {ExactNNZ, 40000}} {
		keys := make([]uint64, c.n)
		for i := range keys {
			keys[i] = (1<<hashedKeyBits - 1) - uint64(rng.IntN(c.distinct))*0x1_0000_0001%(1<<hashedKeyBits)
		}
		slots := 1 << bits.Len(uint(2*c.n-1))
		got := tableCounts(slices.Clone(keys), make([]uint64, slots))
		want := runLengths(slices.Clone(keys), make([]uint64, c.n), hashedKeyBits)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%d keys, %d distinct: table counts %v..., sorted counts %v...", c.n, c.distinct, got[:min(5, len(got))], want[:min(5, len(want))])
		}
	}
}

// noiseTop is the count that fewer than one of n Poisson(λ) draws reach.
func TestNoiseTop(t *testing.T) {
	for _, c := range []struct{ lambda, n, want float64 }{
		{0.2, 5000, 4}, // 5000·P(X ≥ 3) = 5.7, 5000·P(X ≥ 4) = 0.29
		{1, 10, 3},     // 10·P(X ≥ 2) = 2.6, 10·P(X ≥ 3) = 0.80
		{1, 1, 0},      // one draw: nothing to compare with
		{0, 100, 0},
		{100, 1000, 138}, // normal approximation: 100 + √(200 ln 1000) = 137.2
	} {
		if got := noiseTop(c.lambda, c.n); got != c.want {
			t.Errorf("noiseTop(%g, %g) = %g, want %g", c.lambda, c.n, got, c.want)
		}
	}
}

// MTTKRP's fiber features describe the fibers of the last mode of the
// order its CSF is rooted in (revision 2), which are SpTTM's fiber
// features of that mode; its slice features stay the mode's own.
func TestMTTKRPFiberFeatures(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range [][]int{{40, 50, 60}, {7, 300, 20, 9}} {
		x := randomTensor(rng, dims, 5000, false)
		s, err := Summarize(x)
		if err != nil {
			t.Fatal(err)
		}
		for m := range dims {
			rooted := formats.RootedOrder(len(dims), m)
			leaf := rooted[len(rooted)-1]
			got, err := s.Global(hetero.MTTKRP, m)
			if err != nil {
				t.Fatal(err)
			}
			ttmLeaf, _ := s.Global(hetero.SpTTM, leaf)
			ttmOwn, _ := s.Global(hetero.SpTTM, m)
			fibers := []Feature{LogFibers, LogFiberNNZMean, LogFiberNNZStd, LogFiberNNZMax, LogFiberNNZCV}
			for _, f := range fibers {
				if got[f] != ttmLeaf[f] {
					t.Errorf("dims %v mode %d: mttkrp %s = %v, want mode %d's fibers' %v", dims, m+1, f, got[f], leaf+1, ttmLeaf[f])
				}
			}
			if got[LogSlices] != ttmOwn[LogSlices] || got[LogSliceNNZMax] != ttmOwn[LogSliceNNZMax] {
				t.Errorf("dims %v mode %d: mttkrp slices %v / %v, want the mode's own %v / %v", dims, m+1, got[LogSlices], got[LogSliceNNZMax], ttmOwn[LogSlices], ttmOwn[LogSliceNNZMax])
			}
		}
	}
}
