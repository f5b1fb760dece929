package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/sparsetune/sparsetune/formats"
)

// Agreement metric: the normwise relative error ||M - Mref||_F / ||Mref||_F
// of a kernel's float32 output M against the float64 reference, at most
// mttkrpTol. Normwise rather than elementwise because an entry that is a
// sum of terms that nearly cancel has a large relative error in any
// float32 summation order, which says nothing about the kernel.
const mttkrpTol = 1e-4

// relErr returns ||got - want||_F / ||want||_F (||got||_F when want is 0).
func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i, w := range want {
		d := float64(got[i]) - w
		num += d * d
		den += w * w
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// randomCOO returns an order-len(dims) tensor with nnz random nonzeros
// (some duplicated coordinates, values in [-1, 1)).
func randomCOO(rng *rand.Rand, dims []int, nnz int) *formats.COO {
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		panic(err)
	}
	idx := make([]uint32, len(dims))
	for k := range nnz {
		if k > 0 && rng.IntN(10) == 0 { // a duplicate of the previous coordinate
			x.Append(x.Coord(k-1, idx), 2*rng.Float32()-1)
			continue
		}
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, 2*rng.Float32()-1)
	}
	return x
}

// randomFactors returns one dims[m] x rank matrix per mode, entries in [-1, 1).
func randomFactors(rng *rand.Rand, dims []int, rank int) []*Matrix {
	fs := make([]*Matrix, len(dims))
	for m, d := range dims {
		fs[m] = NewMatrix(d, rank)
		for i := range fs[m].Data {
			fs[m].Data[i] = 2*rng.Float32() - 1
		}
	}
	return fs
}

// plans builds the MTTKRP plan of x for mode and rank in every format and
// variant: COO as given and sorted by the mode, CSF rooted at the mode,
// HiCOO with default and tiny blocks, ALTO without and with a block cap.
func plans(t testing.TB, x *formats.COO, mode, rank, threads int) []*MTTKRP {
	t.Helper()
	var out []*MTTKRP
	add := func(name string, p *MTTKRP, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p.format = name // label the variant in failure messages
		out = append(out, p)
	}
	p, err := NewCOOMTTKRP(x, mode, rank, threads)
	add("coo", p, err)
	order := append([]int{mode}, otherModes(x.Order(), mode)...)
	// The formats by name, as sparsetune bench builds them: COO sorted by
	// the mode, CSF rooted at it, HiCOO and ALTO with their defaults.
	for _, name := range formats.TensorFormatNames {
		f, err := formats.NewTensorFormat(x, name, mode)
		if err != nil {
			t.Fatal(err)
		}
		p, err = NewMTTKRP(f, mode, rank, threads)
		add(name+"-named", p, err)
	}
	csf, err := formats.NewCSF(x, order)
	if err != nil {
		t.Fatal(err)
	}
	p, err = NewCSFMTTKRP(csf, mode, rank, threads)
	add("csf", p, err)
	for _, bits := range []int{formats.DefaultHiCOOBlockBits, 2} {
		h, err := formats.NewHiCOO(x, bits)
		if err != nil {
			t.Fatal(err)
		}
		p, err = NewHiCOOMTTKRP(h, mode, rank, threads)
		add(fmt.Sprintf("hicoo-b%d", bits), p, err)
	}
	for _, cap := range []int{0, 97} {
		a, err := formats.NewALTO(x, cap)
		if err != nil {
			t.Fatal(err)
		}
		p, err = NewALTOMTTKRP(a, mode, rank, threads)
		add(fmt.Sprintf("alto-cap%d", cap), p, err)
	}
	return out
}

func otherModes(n, mode int) []int {
	var o []int
	for m := range n {
		if m != mode {
			o = append(o, m)
		}
	}
	return o
}

// checkAll runs every format's plan for every mode and rank of x against
// the reference.
func checkAll(t *testing.T, x *formats.COO, ranks []int, threads int, rng *rand.Rand) {
	t.Helper()
	for _, R := range ranks {
		checkAllWith(t, x, randomFactors(rng, x.Dims, R), threads)
	}
}

// checkAllWith runs every format's plan for every mode of x with the
// factors fs against the reference.
func checkAllWith(t *testing.T, x *formats.COO, fs []*Matrix, threads int) {
	t.Helper()
	R := fs[0].Cols
	for mode := range x.Order() {
		want, err := MTTKRPReference(x, mode, fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range plans(t, x, mode, R, threads) {
			out := NewMatrix(x.Dims[mode], R)
			for i := range out.Data { // Run must overwrite, not add
				out.Data[i] = float32(math.NaN())
			}
			if err := p.Run(out, fs); err != nil {
				t.Fatalf("%s mode %d R %d: %v", p.Format(), mode, R, err)
			}
			if e := relErr(out.Data, want); !(e <= mttkrpTol) {
				t.Errorf("%s mode %d R %d threads %d (parts %d): relative error %.3g > %g",
					p.Format(), mode, R, threads, p.Parts(), e, mttkrpTol)
			}
		}
	}
}

// lowGrain lets small tensors run on several parts for the test's duration.
func lowGrain(t *testing.T, grain int) {
	old := minPartNNZ
	minPartNNZ = grain
	t.Cleanup(func() { minPartNNZ = old })
}

func TestMTTKRPRandom(t *testing.T) {
	lowGrain(t, 64)
	cases := []struct {
		name string
		dims []int
		nnz  int
	}{
		{"order2", []int{300, 41}, 2000},
		{"order2-dim1", []int{1, 500}, 700},
		{"order3", []int{60, 200, 35}, 3000},
		{"order3-dim1", []int{50, 1, 70}, 1500},
		{"order3-skewed", []int{3, 5000, 4}, 2500},
		{"order4", []int{20, 31, 17, 300}, 3000},
		{"order5", []int{9, 13, 6, 11, 40}, 2500},
		{"order3-tiny", []int{4, 3, 2}, 5},
		{"order4-empty", []int{4, 3, 2, 5}, 0},
	}
	eachInnerLoops(t, func(t *testing.T) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				x := randomCOO(rng, c.dims, c.nnz)
				for _, threads := range []int{1, 2, 3} {
					checkAll(t, x, []int{1, 7, 16, 64}, threads, rng)
				}
			})
		}
	})
}

// TestMTTKRPWideRanks covers rank blocks beyond one 64-column pass and
// every block width.
func TestMTTKRPWideRanks(t *testing.T) {
	lowGrain(t, 100)
	eachInnerLoops(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 3))
		x := randomCOO(rng, []int{40, 50, 60}, 1500)
		checkAll(t, x, []int{2, 3, 5, 8, 24, 32, 100, 129}, 2, rng)
	})
}

// TestMTTKRPPaddedRanks checks the plans that pad the rank to whole
// vector blocks (padRank): which ranks are padded on which inner loops,
// that every format agrees with the reference at ranks that are not a
// multiple of eight, with the copies made on the calling goroutine and
// split among the parts, and that the caller's factors are left as they
// were.
func TestMTTKRPPaddedRanks(t *testing.T) {
	lowGrain(t, 64)
	oldSerial := padSerial
	t.Cleanup(func() { padSerial = oldSerial })
	rng := rand.New(rand.NewPCG(5, 9))
	x := randomCOO(rng, []int{90, 7, 300}, 3000)
	eachInnerLoops(t, func(t *testing.T) {
		for _, R := range []int{1, 3, 4, 7, 8, 9, 12, 15, 17, 20, 24, 31, 33, 48, 65, 100} {
			want := R
			if vec != vecScalar {
				want = map[int]int{1: 8, 3: 8, 4: 8, 7: 8, 8: 8, 9: 16, 12: 16, 15: 16, 17: 32, 20: 32, 24: 32, 31: 32, 33: 64, 48: 64, 65: 72, 100: 128}[R]
			}
			for _, p := range plans(t, x, 0, R, 2) {
				if p.ld != want {
					t.Errorf("%s R %d on %s: rows of %d, want %d", p.Format(), R, vec, p.ld, want)
				}
			}
			// What a caller checks memory for is what the plan holds.
			shapes := MTTKRPPadShapes(x.Dims, 0, R)
			if (shapes == nil) != (want == R) || (shapes != nil && (len(shapes) != x.Order() || shapes[0] != [2]int{x.Dims[0], want})) {
				t.Errorf("R %d on %s: MTTKRPPadShapes %v", R, vec, shapes)
			}
			for _, serial := range []int{oldSerial, 0} {
				padSerial = serial
				fs := randomFactors(rng, x.Dims, R)
				before := make([][]float32, len(fs))
				for m, f := range fs {
					before[m] = slices.Clone(f.Data)
				}
				for _, threads := range []int{1, 3} {
					checkAllWith(t, x, fs, threads)
				}
				for m, f := range fs {
					if !slices.Equal(f.Data, before[m]) {
						t.Errorf("R %d: factor %d changed by Run", R, m)
					}
				}
			}
		}
	})
}

// TestMTTKRPALTOWide checks ALTO with a linear index wider than 64 bits,
// so BLCO blocks carry the high bits, with and without a block cap (plans
// builds both), on orders 4, 5 and 8 (order 3 would need dims of 2^22,
// and factor matrices that large, to pass 64 bits).
func TestMTTKRPALTOWide(t *testing.T) {
	lowGrain(t, 64)
	for i, dims := range [][]int{
		{1 << 17, 1 << 17, 1<<17 - 5, 1 << 17},          // 68 bits, order 4: the fused loops' BLCO variant
		{1 << 14, 1 << 14, 1<<14 - 3, 1 << 14, 1 << 10}, // 66 bits, order 5
		{512, 512, 300, 512, 512, 511, 512, 512},        // 71 bits, order 8
	} {
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		// Clustered indices keep the factor matrices' touched rows few
		// while the dims force the wide index.
		x := randomCOO(rng, dims, 2000)
		for m, d := range dims {
			for k := range x.Inds[m] {
				x.Inds[m][k] = uint32(d-1) - x.Inds[m][k]%16
			}
		}
		a, err := formats.NewALTO(x, 0)
		if err != nil {
			t.Fatal(err)
		}
		if a.Bits <= 64 || a.BlockHigh == nil {
			t.Fatalf("dims %v: %d bits, want > 64 with BLCO blocks", dims, a.Bits)
		}
		for _, threads := range []int{1, 2} {
			checkAllSparseFactors(t, x, []int{1, 16}, threads, rng)
		}
	}
}

// checkAllSparseFactors is checkAll for huge dims: only the rows the
// tensor touches get nonzero factor entries, but the matrices still have
// Dims rows, as Run requires. It only builds ALTO and COO plans (CSF and
// HiCOO are covered elsewhere and would cost the same checks).
func checkAllSparseFactors(t *testing.T, x *formats.COO, ranks []int, threads int, rng *rand.Rand) {
	t.Helper()
	for _, R := range ranks {
		fs := make([]*Matrix, x.Order())
		for m, d := range x.Dims {
			fs[m] = NewMatrix(d, R)
			for _, i := range x.Inds[m] {
				row := fs[m].Row(int(i))
				for r := range row {
					row[r] = 2*rng.Float32() - 1
				}
			}
		}
		for mode := range x.Order() {
			want, err := MTTKRPReference(x, mode, fs)
			if err != nil {
				t.Fatal(err)
			}
			var ps []*MTTKRP
			for _, cap := range []int{0, 50} {
				a, err := formats.NewALTO(x, cap)
				if err != nil {
					t.Fatal(err)
				}
				p, err := NewALTOMTTKRP(a, mode, R, threads)
				if err != nil {
					t.Fatal(err)
				}
				p.format = fmt.Sprintf("alto-cap%d", cap)
				ps = append(ps, p)
			}
			p, err := NewCOOMTTKRP(x, mode, R, threads)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
			out := NewMatrix(x.Dims[mode], R)
			for _, p := range ps {
				if err := p.Run(out, fs); err != nil {
					t.Fatal(err)
				}
				if e := relErr(out.Data, want); !(e <= mttkrpTol) {
					t.Errorf("%s mode %d R %d threads %d: relative error %.3g", p.Format(), mode, R, threads, e)
				}
			}
		}
	}
}

// realTensors returns the paths of the shared real tensors, skipping the
// test when they are absent.
func realTensors(t testing.TB) []string {
	dir := filepath.Join("..", "..", "shared", "data", "tensors")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.tns"))
	if len(paths) == 0 {
		t.Skipf("no real tensors in %s (the shared data directory is absent)", dir)
	}
	return paths
}

func TestMTTKRPRealTensors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, path := range realTensors(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".tns")
		t.Run(name, func(t *testing.T) {
			x, err := formats.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ranks := []int{1, 7, 16, 64}
			if testing.Short() && x.NNZ() > 50000 {
				ranks = []int{7, 16}
			}
			checkAll(t, x, ranks, 2, rng)
		})
	}
}

// TestMTTKRPReuse runs each plan several times with different factors:
// every run must overwrite the output with the new result.
func TestMTTKRPReuse(t *testing.T) {
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(9, 9))
	x := randomCOO(rng, []int{30, 40, 50}, 2000)
	for mode := range 3 {
		for _, p := range plans(t, x, mode, 16, 2) {
			out := NewMatrix(x.Dims[mode], 16)
			for range 3 {
				fs := randomFactors(rng, x.Dims, 16)
				want, _ := MTTKRPReference(x, mode, fs)
				if err := p.Run(out, fs); err != nil {
					t.Fatal(err)
				}
				if e := relErr(out.Data, want); e > mttkrpTol {
					t.Fatalf("%s mode %d: relative error %.3g on a reused plan", p.Format(), mode, e)
				}
			}
		}
	}
}

// TestMTTKRPAllocs checks that a plan's steady state allocates nothing.
func TestMTTKRPAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("allocation counts are not meaningful under -cover or -race")
	}
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	x := randomCOO(rng, []int{30, 40, 50, 7}, 3000)
	for _, R := range []int{7, 16} {
		fs := randomFactors(rng, x.Dims, R)
		for mode := range x.Order() {
			for _, p := range plans(t, x, mode, R, 2) {
				out := NewMatrix(x.Dims[mode], R)
				if n := testing.AllocsPerRun(20, func() { _ = p.Run(out, fs) }); n != 0 {
					t.Errorf("%s mode %d R %d: %v allocations per Run, want 0", p.Format(), mode, R, n)
				}
			}
		}
	}
}

func TestMTTKRPErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := randomCOO(rng, []int{5, 6, 7}, 50)
	csf, err := formats.NewCSF(x, []int{1, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCSFMTTKRP(csf, 0, 4, 1); !errors.Is(err, errNotRoot) {
		t.Errorf("CSF rooted at mode 1 used for mode 0: got %v, want the not-rooted error", err)
	}
	if _, err := NewCOOMTTKRP(x, 3, 4, 1); err == nil {
		t.Error("mode 3 of an order-3 tensor accepted")
	}
	if _, err := NewCOOMTTKRP(x, 0, 0, 1); err == nil {
		t.Error("rank 0 accepted")
	}
	p, err := NewCOOMTTKRP(x, 1, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := randomFactors(rng, x.Dims, 4)
	for _, c := range []struct {
		name    string
		out     *Matrix
		factors []*Matrix
		want    string
	}{
		{"nil output", nil, good, "output: matrix is nil"},
		{"wrong output rows", NewMatrix(5, 4), good, "output: matrix is 5x4, expected 6x4"},
		{"wrong output cols", NewMatrix(6, 3), good, "expected 6x4"},
		{"too few factors", NewMatrix(6, 4), good[:2], "2 factor matrices for an order-3 tensor"},
		{"wrong factor rank", NewMatrix(6, 4), []*Matrix{NewMatrix(5, 3), nil, good[2]}, "factor 0: matrix is 5x3, expected 5x4"},
		{"short data", NewMatrix(6, 4), []*Matrix{{Rows: 5, Cols: 4, Data: make([]float32, 19)}, nil, good[2]}, "holds 19 values, expected 20"},
		{"missing factor", NewMatrix(6, 4), []*Matrix{good[0], nil, nil}, "factor 2: matrix is nil"},
	} {
		err := p.Run(c.out, c.factors)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// The output mode's factor is not read, so nil is fine there.
	if err := p.Run(NewMatrix(6, 4), []*Matrix{good[0], nil, good[2]}); err != nil {
		t.Errorf("nil factor for the output mode: %v", err)
	}
}

// TestMTTKRPPlacement pins the parallel strategy: a COO sorted by the
// output mode and a CSF run owner-computes (no private copies), an
// unsorted COO privatises. (HiCOO and ALTO privatise or not depending on
// whether Z order happens to separate the parts' output rows.)
func TestMTTKRPPlacement(t *testing.T) {
	lowGrain(t, 64)
	rng := rand.New(rand.NewPCG(6, 6))
	x := randomCOO(rng, []int{100, 30, 20}, 4000)
	for _, p := range plans(t, x, 0, 8, 4) {
		private := slices.ContainsFunc(p.priv, func(b []float32) bool { return b != nil })
		wantPrivate := p.Format() == "coo"
		if p.Format() != "coo" && p.Format() != "coo-sorted" && p.Format() != "csf" {
			continue
		}
		if p.Parts() != 4 {
			t.Errorf("%s: %d parts, want 4", p.Format(), p.Parts())
		}
		if private != wantPrivate {
			t.Errorf("%s: private copies %v, want %v", p.Format(), private, wantPrivate)
		}
	}
}

// TestIsolated: memory a part writes has isolatePad unused elements on
// either side, so two such buffers made one after the other (which Go
// would otherwise place side by side) lie at least both pads apart.
func TestIsolated(t *testing.T) {
	for _, n := range []int{1, 128, chunkNNZ} {
		a, c := isolated(n), isolated(n)
		if len(a) != n || cap(a) != n {
			t.Fatalf("n = %d: len %d cap %d", n, len(a), cap(a))
		}
		pa, pc := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&c[0]))
		if gap := max(pa, pc) - min(pa, pc); gap < uintptr(4*(n+2*isolatePad)) {
			t.Errorf("n = %d: two isolated buffers start %d bytes apart, want at least %d", n, gap, 4*(n+2*isolatePad))
		}
	}
}

// TestMTTKRPCSFLeaf: a CSF whose leaf CSFOrder moved (the third mode
// follows from the second, so RootedOrder's leaf holds one nonzero per
// fiber) computes every mode's MTTKRP as the definition does, through
// formats.NewTensorFormat as the engine and bench build it.
func TestMTTKRPCSFLeaf(t *testing.T) {
	x, _ := formats.NewCOO([]int{50, 40, 3}, 2000)
	for i := range 50 {
		for j := range 40 {
			x.Append([]uint32{uint32(i), uint32(j), uint32(j % 3)}, float32(1+(i*7+j)%5))
		}
	}
	rng := rand.New(rand.NewPCG(12, 13))
	fs := randomFactors(rng, x.Dims, 16)
	for mode := range x.Order() {
		f, err := formats.NewTensorFormat(x, "csf", mode)
		if err != nil {
			t.Fatal(err)
		}
		if c := f.(*formats.CSF); slices.Equal(c.ModeOrder, formats.RootedOrder(3, mode)) {
			t.Fatalf("mode %d: the CSF kept RootedOrder %v; the test needs a moved leaf", mode+1, c.ModeOrder)
		}
		p, err := NewMTTKRP(f, mode, 16, 2)
		if err != nil {
			t.Fatal(err)
		}
		out := NewMatrix(x.Dims[mode], 16)
		if err := p.Run(out, fs); err != nil {
			t.Fatal(err)
		}
		want, err := MTTKRPReference(x, mode, fs)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(out.Data, want); e > 1e-5 {
			t.Errorf("mode %d: relative error %.2e", mode+1, e)
		}
	}
}
