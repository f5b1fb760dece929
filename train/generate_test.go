package train

import (
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
)

// matrixDir is where the SuiteSparse matrices are, relative to the package.
var matrixDir = filepath.Join("..", "..", "shared", "data", "suitesparse")

// readMatrix reads a SuiteSparse matrix of the shared data, skipping the
// test when the data is absent.
func readMatrix(t testing.TB, name string) *formats.COO {
	t.Helper()
	m, err := ReadMatrix(filepath.Join(matrixDir, name))
	if err != nil {
		if strings.Contains(err.Error(), "no such file") {
			t.Skipf("real data absent (%v): skipping", err)
		}
		t.Fatal(err)
	}
	return m
}

// one returns a single-stage spec.
func one(gen string, p Params, target int, seed uint64) Spec {
	return Spec{Source: "x", Stages: []Stage{{Generator: gen, Params: p}}, TargetNNZ: target, Seed: seed}
}

// two returns a two-stage spec.
func two(gen1 string, p1 Params, gen2 string, p2 Params, target int, seed uint64) Spec {
	return Spec{Source: "x", Stages: []Stage{{Generator: gen1, Params: p1}, {Generator: gen2, Params: p2}}, TargetNNZ: target, Seed: seed}
}

// checkValid fails unless x is a valid generated tensor of the given order:
// valid, sorted, without repeated coordinates, with tight dims.
func checkValid(t *testing.T, x *formats.COO, order int) {
	t.Helper()
	if err := x.Validate(); err != nil {
		t.Fatal(err)
	}
	if x.Order() != order {
		t.Fatalf("order %d, want %d", x.Order(), order)
	}
	if x.NNZ() == 0 {
		t.Fatal("no nonzeros")
	}
	for k := 1; k < x.NNZ(); k++ {
		less := false
		for m := range x.Inds {
			a, b := x.Inds[m][k-1], x.Inds[m][k]
			if a != b {
				less = a < b
				break
			}
		}
		if !less {
			t.Fatalf("nonzeros %d and %d are out of order or repeated", k-1, k)
		}
	}
	for m, ind := range x.Inds {
		if int(slices.Max(ind))+1 != x.Dims[m] {
			t.Fatalf("mode %d: dim %d but largest index %d: dims must be tight", m+1, x.Dims[m], slices.Max(ind))
		}
	}
}

// generators covers every generator, alone and chained, and the new mode
// in the middle.
var generators = []struct {
	name string
	spec func(target int, seed uint64) Spec
}{
	{"slices", func(n int, s uint64) Spec { return one(GenSlices, Params{Shuffle: 0.1}, n, s) }},
	{"slices-shuffled", func(n int, s uint64) Spec { return one(GenSlices, Params{Frac: 0.6, Shuffle: 1}, n, s) }},
	{"lift", func(n int, s uint64) Spec { return one(GenLift, Params{}, n, s) }},
	{"lift-zipf-middle", func(n int, s uint64) Spec { return one(GenLift, Params{Zipf: 1.2, At: 2}, n, s) }},
	{"band", func(n int, s uint64) Spec { return one(GenBand, Params{}, n, s) }},
	{"bursts", func(n int, s uint64) Spec { return one(GenBursts, Params{Width: 2}, n, s) }},
	{"slices+lift", func(n int, s uint64) Spec { return two(GenSlices, Params{}, GenLift, Params{Zipf: 1}, n, s) }},
	{"band+bursts", func(n int, s uint64) Spec { return two(GenBand, Params{}, GenBursts, Params{}, n, s) }},
	{"bursts+lift", func(n int, s uint64) Spec { return two(GenBursts, Params{}, GenLift, Params{At: 1}, n, s) }},
}

func TestGenerateDeterministicValid(t *testing.T) {
	m := readMatrix(t, "add32.mtx")
	for _, g := range generators {
		t.Run(g.name, func(t *testing.T) {
			spec := g.spec(100_000, 7)
			a, err := Generate(m, spec)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, a, spec.Order())
			b, err := Generate(m, spec)
			if err != nil {
				t.Fatal(err)
			}
			if !a.Equal(b) {
				t.Fatal("the same spec gave two different tensors")
			}
			spec.Seed = 8
			c, err := Generate(m, spec)
			if err != nil {
				t.Fatal(err)
			}
			if a.Equal(c) {
				t.Fatal("seeds 7 and 8 gave the same tensor")
			}
			if r := float64(a.NNZ()) / 100_000; r < 0.7 || r > 1.3 {
				t.Fatalf("%d nonzeros for a target of 100000", a.NNZ())
			}
		})
	}
}

// TestGenerateIgnoresThreads checks that the number of threads (the sort
// runs in parallel) does not change the result.
func TestGenerateIgnoresThreads(t *testing.T) {
	m := readMatrix(t, "add32.mtx")
	spec := two(GenSlices, Params{Shuffle: 0.5}, GenBursts, Params{}, 200_000, 3)
	var got []*formats.COO
	for _, procs := range []int{1, 4} {
		old := runtime.GOMAXPROCS(procs)
		x, err := Generate(m, spec)
		runtime.GOMAXPROCS(old)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if !got[0].Equal(got[1]) {
		t.Fatal("GOMAXPROCS changed the tensor")
	}
}

// TestGenerateTargets checks nnz within 30% of targets from 10^3 to 10^6,
// including targets below the matrix's nonzeros (sampling).
func TestGenerateTargets(t *testing.T) {
	cases := []struct {
		matrix string
		target int
	}{
		{"jazz.mtx", 1_000},       // 5484 nonzeros: every generator samples
		{"add32.mtx", 10_000},     // 23884
		{"bcsstk15.mtx", 100_000}, // 117816
		{"cage10.mtx", 1_000_000}, // 150645
	}
	for _, c := range cases {
		m := readMatrix(t, c.matrix)
		for _, gen := range []string{GenSlices, GenLift, GenBand, GenBursts} {
			for _, order := range []int{3, 4} {
				spec := one(gen, Params{}, c.target, 11)
				if order == 4 {
					spec = two(gen, Params{}, GenLift, Params{}, c.target, 11)
				}
				x, err := Generate(m, spec)
				if err != nil {
					t.Fatalf("%s %s order %d: %v", c.matrix, gen, order, err)
				}
				t.Logf("%s %s order %d: dims %v, nnz %d (%.3f of the target)", c.matrix, gen, order, x.Dims, x.NNZ(), float64(x.NNZ())/float64(c.target))
				checkValid(t, x, order)
				if r := float64(x.NNZ()) / float64(c.target); r < 0.7 || r > 1.3 {
					t.Errorf("%s %s order %d: %d nonzeros for a target of %d", c.matrix, gen, order, x.NNZ(), c.target)
				}
			}
		}
	}
}

// matrixMap indexes m's nonzeros by coordinate.
func matrixMap(m *formats.COO) map[[2]uint32]float32 {
	at := make(map[[2]uint32]float32, m.NNZ())
	for k, v := range m.Vals {
		at[[2]uint32{m.Inds[0][k], m.Inds[1][k]}] = v
	}
	return at
}

func TestSlicesKeepMatrix(t *testing.T) {
	m := readMatrix(t, "bcsstk21.mtx")
	src, err := canonicalMatrix(m)
	if err != nil {
		t.Fatal(err)
	}
	// One slice, every row and column kept, none relabelled: M itself.
	x, err := Generate(m, one(GenSlices, Params{Size: 1, Frac: 1}, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if x.NNZ() != src.NNZ() || !slices.Equal(x.Inds[0], src.Inds[0]) || !slices.Equal(x.Inds[1], src.Inds[1]) || !slices.Equal(x.Vals, src.Vals) {
		t.Fatal("slices with size 1, frac 1, shuffle 0 is not the matrix")
	}
	// Everything relabelled: M up to a permutation of rows and of columns,
	// so the same row and column degrees and values, as multisets.
	y, err := Generate(m, one(GenSlices, Params{Size: 1, Frac: 1, Shuffle: 1}, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	if y.Equal(x) {
		t.Fatal("shuffle 1 relabelled nothing")
	}
	degrees := func(ind []uint32, n int) []int {
		d := make([]int, n)
		for _, i := range ind {
			d[i]++
		}
		slices.Sort(d)
		return d
	}
	for mode := range 2 {
		if !slices.Equal(degrees(x.Inds[mode], src.Dims[mode]), degrees(y.Inds[mode], src.Dims[mode])) {
			t.Fatalf("mode %d degrees changed under relabelling", mode+1)
		}
	}
	vx, vy := slices.Clone(x.Vals), slices.Clone(y.Vals)
	slices.Sort(vx)
	slices.Sort(vy)
	if !slices.Equal(vx, vy) {
		t.Fatal("values changed under relabelling")
	}
	// Without relabelling, every slice is a subset of M.
	at := matrixMap(src)
	z, err := Generate(m, one(GenSlices, Params{Size: 5, Frac: 0.7}, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range z.Vals {
		if w, ok := at[[2]uint32{z.Inds[0][k], z.Inds[1][k]}]; !ok || w != v {
			t.Fatalf("nonzero %d is not M's", k)
		}
	}
}

func TestBandKeepsDiagonals(t *testing.T) {
	m := readMatrix(t, "bcsstk21.mtx")
	src, _ := canonicalMatrix(m)
	at := matrixMap(src)
	spec := one(GenBand, Params{Size: 6, Frac: 1, Step: 40}, 0, 1)
	x, err := Generate(m, spec)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, x, 3)
	if x.NNZ() != 6*src.NNZ() {
		t.Fatalf("%d nonzeros, want 6 copies of %d", x.NNZ(), src.NNZ())
	}
	for e, v := range x.Vals {
		off := 40 * x.Inds[2][e]
		i, j := int64(x.Inds[0][e])-int64(off), int64(x.Inds[1][e])-int64(off)
		if i < 0 || j < 0 || i >= int64(src.Dims[0]) || j >= int64(src.Dims[1]) {
			t.Fatalf("nonzero %d outside its copy's band", e)
		}
		if w, ok := at[[2]uint32{uint32(i), uint32(j)}]; !ok || w != v {
			t.Fatalf("nonzero %d is not M's nonzero shifted by %d", e, off)
		}
	}
}

func TestLiftIsOuterProduct(t *testing.T) {
	m := readMatrix(t, "bcsstk21.mtx")
	src, _ := canonicalMatrix(m)
	// Grow = Support = Size, Zipf 0: every slice keeps every nonzero, so X
	// is exactly M ∘ v.
	x, err := Generate(m, one(GenLift, Params{Size: 5, Grow: 5}, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if x.NNZ() != 5*src.NNZ() {
		t.Fatalf("%d nonzeros, want %d", x.NNZ(), 5*src.NNZ())
	}
	// Sorted by (i, j, k): nonzero e of M is at 5e .. 5e+4.
	var v [5]float32
	for e := range src.NNZ() {
		for k := range 5 {
			y := 5*e + k
			if x.Inds[0][y] != src.Inds[0][e] || x.Inds[1][y] != src.Inds[1][e] || x.Inds[2][y] != uint32(k) {
				t.Fatalf("nonzero %d of M is not in slice %d", e, k)
			}
			if src.Vals[e] == 0 {
				continue
			}
			r := x.Vals[y] / src.Vals[e]
			if v[k] == 0 {
				v[k] = r
			}
			if math.Abs(float64(r-v[k])) > 1e-5*math.Abs(float64(v[k])) || r < 0.5 || r >= 1.5 {
				t.Fatalf("slice %d: ratio %g, want one v(%d) in [0.5, 1.5) (first %g)", k, r, k, v[k])
			}
		}
	}
}

func TestLiftZipfSlices(t *testing.T) {
	m := readMatrix(t, "add32.mtx")
	x, err := Generate(m, one(GenLift, Params{Size: 40, Support: 40, Zipf: 1.5}, 200_000, 1))
	if err != nil {
		t.Fatal(err)
	}
	sizes := make([]int, x.Dims[2])
	for _, k := range x.Inds[2] {
		sizes[k]++
	}
	slices.Sort(sizes)
	// Zipf(1.5) over 40 slices: the largest slices hold all of M, the
	// smallest a few percent of it.
	if sizes[len(sizes)-1] != 23884 || sizes[0] > 23884/5 {
		t.Fatalf("slice sizes %v are not Zipf-like", sizes)
	}
}

func TestBurstsKeepPairs(t *testing.T) {
	m := readMatrix(t, "add32.mtx")
	src, _ := canonicalMatrix(m)
	at := matrixMap(src)
	x, err := Generate(m, one(GenBursts, Params{Size: 50}, 5*src.NNZ(), 1))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]uint32]int{}
	for e, v := range x.Vals {
		key := [2]uint32{x.Inds[0][e], x.Inds[1][e]}
		if w, ok := at[key]; !ok || w != v {
			t.Fatalf("nonzero %d is not one of M's at some time", e)
		}
		seen[key]++
	}
	// A growth of at least 1 makes every nonzero occur at least once.
	if len(seen) != src.NNZ() {
		t.Fatalf("%d of M's %d nonzeros occur", len(seen), src.NNZ())
	}
}

func TestResolveIdempotent(t *testing.T) {
	m := readMatrix(t, "add32.mtx")
	for _, g := range generators {
		spec := g.spec(50_000, 5)
		r, err := spec.Resolve(m)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		rr, err := r.Resolve(m)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if !slices.Equal(r.Stages, rr.Stages) {
			t.Fatalf("%s: resolving again changed\n%+v\nto\n%+v", g.name, r.Stages, rr.Stages)
		}
		a, _ := Generate(m, spec)
		b, err := Generate(m, r)
		if err != nil || !a.Equal(b) {
			t.Fatalf("%s: the resolved spec gives another tensor (%v)", g.name, err)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	m := readMatrix(t, "karate.mtx")
	cube, _ := formats.NewCOO([]int{2, 2, 2}, 1)
	cube.Append([]uint32{0, 0, 0}, 1)
	cases := []struct {
		name string
		m    *formats.COO
		spec Spec
		want string
	}{
		{"order 3 input", cube, one(GenLift, Params{}, 100, 1), "expected a matrix"},
		{"no stages", m, Spec{TargetNNZ: 100}, "no stages"},
		{"unknown", m, one("smear", Params{}, 100, 1), "unknown generator"},
		{"unused param", m, one(GenLift, Params{Step: 3}, 100, 1), "does not use step"},
		{"no target", m, one(GenBursts, Params{}, 0, 1), "target nnz is 0"},
		{"frac range", m, one(GenSlices, Params{Frac: 1.5}, 100, 1), "frac and shuffle"},
		{"too large", m, one(GenLift, Params{}, MaxNNZ*2, 1), "at most"},
		{"support too small", m, one(GenLift, Params{Support: 2}, 10_000, 1), "cannot grow"},
		{"bursts zipf", m, one(GenBursts, Params{Zipf: 0.5}, 100, 1), "zipf must be > 1"},
		{"grow conflicts", m, one(GenSlices, Params{Size: 2, Frac: 0.5, Grow: 3}, 0, 1), "disagrees"},
		{"at past end", m, one(GenLift, Params{At: 5}, 100, 1), "past the output's last mode"},
		{"size", m, one(GenBursts, Params{Size: MaxSize + 1}, 100, 1), "exceeds"},
		{"slices work", m, one(GenSlices, Params{Size: 1 << 24, Frac: 0.001}, 0, 1), "too much work"},
		{"order 9", m, Spec{Stages: make([]Stage, 7), TargetNNZ: 100}, "at most 8"},
	}
	for _, c := range cases {
		_, err := Generate(c.m, c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// BenchmarkGenerate10M generates 10^7 nonzeros from bcsstk33 (591904) with
// each generator, and order 4; it reports the nonzeros made per second.
func BenchmarkGenerate10M(b *testing.B) {
	m := readMatrix(b, "bcsstk33.mtx")
	for _, g := range generators {
		b.Run(g.name, func(b *testing.B) {
			spec := g.spec(10_000_000, 1)
			var nnz int
			for b.Loop() {
				x, err := Generate(m, spec)
				if err != nil {
					b.Fatal(err)
				}
				nnz = x.NNZ()
			}
			b.ReportMetric(float64(nnz), "nnz")
			b.ReportMetric(float64(nnz)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mnnz/s")
		})
	}
}
