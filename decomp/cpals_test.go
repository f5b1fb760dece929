package decomp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// TestCPALSPlanted recovers exactly low-rank sparse tensors: fit ≥ 0.99 and
// factor match score ≥ 0.95 against the planted factors, in every MTTKRP
// format and with either initialisation.
func TestCPALSPlanted(t *testing.T) {
	cases := []struct {
		name   string
		dims   []int
		rank   int
		frac   float64
		format string
		init   string
		ls     bool
		seed   uint64
	}{
		{"alto-random", []int{30, 40, 50}, 3, 0.3, "alto", InitRandom, false, 1},
		{"csf-random", []int{30, 40, 50}, 3, 0.3, "csf", InitRandom, false, 2},
		{"coo-hosvd", []int{30, 40, 50}, 3, 0.3, "coo", InitHOSVD, false, 3},
		{"hicoo-linesearch", []int{30, 40, 50}, 3, 0.3, "hicoo", InitRandom, true, 4},
		{"order4-alto", []int{10, 12, 14, 16}, 2, 0.4, "alto", InitRandom, false, 5},
		{"order4-csf-hosvd", []int{10, 12, 14, 16}, 3, 0.4, "csf", InitHOSVD, true, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := plantedCP(c.dims, c.rank, c.frac, c.seed)
			res, err := CPALS(p.x, Options{Rank: c.rank, Iters: 300, Tol: 1e-9, Seed: c.seed, Init: c.init,
				LineSearch: c.ls, Formats: []string{c.format}, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, res.Factors, res.Lambda)
			fms, err := FMS(res.Factors, res.Lambda, p.factors, p.lambda)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("nnz %d, %d iterations, fit %.6f, fms %.4f", p.x.NNZ(), res.Iterations, res.Fit, fms)
			if res.Fit < 0.99 || fms < 0.95 {
				t.Fatalf("fit %.6f (want ≥ 0.99), fms %.4f (want ≥ 0.95)", res.Fit, fms)
			}
			// The reported fit must be the true one, computed densely.
			// Near a perfect fit the reported residual is the square
			// root of a difference of norms rounded at float32 (the
			// MTTKRP's): an error ε·‖X‖² there is √ε in the fit. The
			// bound there is √ε for ε = 2⁻²³, twice float32's unit
			// roundoff: 3.5e-4.
			model := cpDense(p.x.Dims, res.Factors, res.Lambda)
			want := 1 - relDiff(model, dense(p.x))
			tol := 1e-4
			if want > 0.999 {
				tol = math.Sqrt(0x1p-23)
			}
			if math.Abs(want-res.Fit) > tol {
				t.Fatalf("reported fit %.6f, dense fit %.6f", res.Fit, want)
			}
		})
	}
}

// denseALSSweep runs one CP-ALS iteration on the dense tensor d in float64
// by the textbook formulas: M = X_(n)(⊙ A_m), A_n = M V⁻¹ with
// V = ∗_{m≠n} A_mᵀA_m, columns normalised by their 2-norm.
func denseALSSweep(dims []int, d []float64, fs [][]float64, R int) ([][]float64, []float64) {
	N := len(dims)
	lambda := make([]float64, R)
	for n := range N {
		M := make([]float64, dims[n]*R)
		idx := 0
		forEachCell(dims, func(c []int) {
			v := d[idx]
			idx++
			if v == 0 {
				return
			}
			for r := range R {
				p := v
				for m := range N {
					if m != n {
						p *= fs[m][c[m]*R+r]
					}
				}
				M[c[n]*R+r] += p
			}
		})
		V := mat.NewDense(R, R, nil)
		for r := range R {
			for q := range R {
				p := 1.0
				for m := range N {
					if m == n {
						continue
					}
					var s float64
					for i := range dims[m] {
						s += fs[m][i*R+r] * fs[m][i*R+q]
					}
					p *= s
				}
				V.Set(r, q, p)
			}
		}
		var A mat.Dense
		// A V = M  ⇔  V Aᵀ = Mᵀ (V symmetric).
		if err := A.Solve(V, mat.NewDense(dims[n], R, M).T()); err != nil {
			panic(err)
		}
		for i := range dims[n] {
			for r := range R {
				fs[n][i*R+r] = A.At(r, i)
			}
		}
		for r := range R {
			var s float64
			for i := range dims[n] {
				s += fs[n][i*R+r] * fs[n][i*R+r]
			}
			lambda[r] = math.Sqrt(s)
			for i := range dims[n] {
				fs[n][i*R+r] /= lambda[r]
			}
		}
	}
	return fs, lambda
}

// TestCPALSMatchesDense holds one sweep of CPALS, from the same start, to
// the dense float64 textbook sweep on tiny tensors.
func TestCPALSMatchesDense(t *testing.T) {
	cases := []struct {
		dims    []int
		rank    int
		density float64
		format  string
	}{
		{[]int{4, 5, 6}, 2, 0.5, "alto"},
		{[]int{4, 5, 6}, 3, 0.7, "csf"},
		{[]int{3, 4, 5, 3}, 2, 0.6, "coo"},
		{[]int{5, 4, 6}, 4, 0.9, "hicoo"},
	}
	for i, c := range cases {
		x := randomSparse(c.dims, c.density, uint64(i+1))
		init := randomFactors(c.dims, slices.Repeat([]int{c.rank}, len(c.dims)), uint64(100+i))
		res, err := CPALS(x, Options{Rank: c.rank, Iters: 1, InitFactors: init, Formats: []string{c.format}})
		if err != nil {
			t.Fatal(err)
		}
		fs := make([][]float64, len(init))
		for m, a := range init {
			for _, v := range a.Data {
				fs[m] = append(fs[m], float64(v))
			}
		}
		fs, lambda := denseALSSweep(c.dims, dense(x), fs, c.rank)
		want := make([]*kernels.Matrix, len(fs))
		for m := range fs {
			want[m] = kernels.NewMatrix(c.dims[m], c.rank)
			for k, v := range fs[m] {
				want[m].Data[k] = float32(v)
			}
		}
		got := cpDense(c.dims, res.Factors, res.Lambda)
		exp := cpDense(c.dims, want, lambda)
		if d := relDiff(got, exp); d > 1e-4 {
			t.Fatalf("%v rank %d: model differs from the dense sweep's by %.2e", c.dims, c.rank, d)
		}
		if wantFit := 1 - relDiff(exp, dense(x)); math.Abs(wantFit-res.Fit) > 1e-4 {
			t.Fatalf("%v rank %d: fit %.6f, dense %.6f", c.dims, c.rank, res.Fit, wantFit)
		}
	}
}

// TestCPALSDeterministic runs the same request twice: equal seeds (and
// threads) give bit-identical results.
func TestCPALSDeterministic(t *testing.T) {
	x := randomSparse([]int{20, 25, 30}, 0.05, 9)
	for _, init := range []string{InitRandom, InitHOSVD} {
		opts := Options{Rank: 4, Iters: 5, Seed: 42, Init: init, Threads: 2, LineSearch: true}
		a, err := CPALS(x, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := CPALS(x, opts)
		if err != nil {
			t.Fatal(err)
		}
		if a.Fit != b.Fit || !slices.Equal(a.Lambda, b.Lambda) {
			t.Fatalf("%s: fits %v and %v, lambdas %v and %v", init, a.Fit, b.Fit, a.Lambda, b.Lambda)
		}
		for m := range a.Factors {
			if !slices.Equal(a.Factors[m].Data, b.Factors[m].Data) {
				t.Fatalf("%s: factor of mode %d differs", init, m+1)
			}
		}
		opts.Seed = 43
		c, err := CPALS(x, opts)
		if err != nil {
			t.Fatal(err)
		}
		if init == InitRandom && slices.Equal(a.Factors[0].Data, c.Factors[0].Data) {
			t.Fatal("seeds 42 and 43 gave the same factors")
		}
	}
}

// TestCPALSRealTensor runs a few iterations on a real tensor: the fit must
// not decrease (ALS is monotone up to float32 rounding) and must be in
// (0, 1].
func TestCPALSRealTensor(t *testing.T) {
	x := realTensor(t, "splatt_med.tns")
	for _, format := range []string{"alto", "csf"} {
		var fits []float64
		res, err := CPALS(x, Options{Rank: 8, Iters: 6, Seed: 1, Formats: []string{format},
			Progress: func(s IterStat) { fits = append(fits, s.Fit) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: fits %v", format, fits)
		if len(fits) != 6 || len(res.History) != 6 {
			t.Fatalf("%d progress calls, %d history entries, want 6", len(fits), len(res.History))
		}
		for i := 1; i < len(fits); i++ {
			if fits[i] < fits[i-1]-1e-5 {
				t.Fatalf("%s: fit dropped at iteration %d: %v", format, i+1, fits)
			}
		}
		if fits[5] <= fits[0] || fits[5] <= 0 || fits[5] > 1 {
			t.Fatalf("%s: fits %v", format, fits)
		}
		checkFinite(t, res.Factors, res.Lambda)
	}
}

// TestCPALSDegenerate feeds rank-deficient and ill-conditioned problems:
// the factors must stay finite, and the pseudo-inverse must be used.
func TestCPALSDegenerate(t *testing.T) {
	oneNZ, _ := formats.NewCOO([]int{3, 4, 5}, 1)
	oneNZ.Append([]uint32{1, 2, 3}, 2)
	small := randomSparse([]int{2, 3, 2}, 0.8, 3)
	rank1 := plantedCP([]int{10, 11, 12}, 1, 0.5, 8).x

	// Two identical columns make every Gram matrix singular.
	twin := randomFactors(rank1.Dims, []int{3, 3, 3}, 1)
	for _, a := range twin {
		for i := range a.Rows {
			a.Data[i*3+1] = a.Data[i*3]
		}
	}
	// A zero column.
	zero := randomFactors(rank1.Dims, []int{3, 3, 3}, 2)
	for _, a := range zero {
		for i := range a.Rows {
			a.Data[i*3+2] = 0
		}
	}
	// minFit is what an exactly representable tensor must reach despite
	// the degenerate systems on the way (0: no requirement).
	cases := []struct {
		name   string
		x      *formats.COO
		opts   Options
		minFit float64
	}{
		{"one nonzero, rank 5", oneNZ, Options{Rank: 5, Iters: 10}, 0.99},
		{"rank above every dim", small, Options{Rank: 6, Iters: 10, LineSearch: true}, 0.99},
		{"rank 1 tensor, rank 3", rank1, Options{Rank: 3, Iters: 30}, 0.99},
		{"twin columns", rank1, Options{Rank: 3, Iters: 10, InitFactors: twin}, 0.99},
		{"zero column", rank1, Options{Rank: 3, Iters: 10, InitFactors: zero}, 0.99},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := CPALS(c.x, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, res.Factors, res.Lambda)
			if math.IsNaN(res.Fit) || res.Fit > 1+1e-9 || res.Fit < c.minFit {
				t.Fatalf("fit %v, want at least %v", res.Fit, c.minFit)
			}
			for _, h := range res.History {
				if math.IsNaN(h.Fit) || math.IsNaN(h.Delta) {
					t.Fatalf("history %+v", h)
				}
				// Once the model fits, float32 noise must not be amplified
				// into a collapse (the failure a too-loose conditioning
				// limit produced: fit 1, then 0.5, then 1).
				if h.Iteration > 3 && h.Fit < c.minFit-0.01 {
					t.Fatalf("fit fell to %v at iteration %d", h.Fit, h.Iteration)
				}
			}
			t.Logf("fit %.6f, %d pseudo-inverse solves", res.Fit, res.PseudoInverses)
		})
	}
}

// TestCPALSErrors checks the one-line errors for bad input.
func TestCPALSErrors(t *testing.T) {
	x := randomSparse([]int{4, 5, 6}, 0.3, 1)
	mtx, _ := formats.NewCOO([]int{4, 5}, 1)
	mtx.Append([]uint32{1, 1}, 1)
	empty, _ := formats.NewCOO([]int{4, 5, 6}, 0)
	nan := x.Clone()
	nan.Vals[0] = float32(math.NaN())
	inf := x.Clone()
	inf.Vals[1] = float32(math.Inf(1))
	zeros := x.Clone()
	clear(zeros.Vals)
	cases := []struct {
		name string
		x    *formats.COO
		opts Options
		want string
	}{
		{"rank 0", x, Options{Rank: 0}, "rank must be >= 1"},
		{"negative rank", x, Options{Rank: -2}, "rank must be >= 1"},
		{"order 2", mtx, Options{Rank: 2}, "order 2"},
		{"empty", empty, Options{Rank: 2}, "empty"},
		{"nan", nan, Options{Rank: 2}, "NaN"},
		{"inf", inf, Options{Rank: 2}, "Inf"},
		{"all zero", zeros, Options{Rank: 2}, "only zero values"},
		{"hosvd rank above dim", x, Options{Rank: 5, Init: InitHOSVD}, "exceeds dim 4 of mode 1"},
		{"bad init", x, Options{Rank: 2, Init: "svd"}, "init must be"},
		{"bad format", x, Options{Rank: 2, Formats: []string{"ell"}}, "MTTKRP format"},
		{"formats count", x, Options{Rank: 2, Formats: []string{"csf", "coo"}}, "one per mode"},
		{"negative iters", x, Options{Rank: 2, Iters: -1}, "iterations"},
		{"negative tol", x, Options{Rank: 2, Tol: -1}, "tolerance"},
		{"init factors shape", x, Options{Rank: 2, InitFactors: randomFactors(x.Dims, []int{3, 3, 3}, 1)}, "expected 4x2"},
		{"init factors data", x, Options{Rank: 2, InitFactors: shortData(randomFactors(x.Dims, []int{2, 2, 2}, 1))}, "is 5x2 with 9 values, expected 5x2"},
		// Its R x R matrices need terabytes where the factors need 38 MB:
		// refused before the first, which ended the process.
		{"rank 10^5", x, Options{Rank: 100000}, "CP-ALS: the factor matrices, their work copies and the R x R Gram matrices need"},
	}
	for _, c := range cases {
		_, err := CPALS(c.x, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", c.name, err, c.want)
		}
	}
}

// countingMTTKRP wraps the CPU kernels, as an engine would supply them.
type countingMTTKRP struct {
	inner *CPU
	calls int
}

func (c *countingMTTKRP) MTTKRP(mode int, fs []*kernels.Matrix, out *kernels.Matrix) error {
	c.calls++
	return c.inner.MTTKRP(mode, fs, out)
}

// TestCPALSSuppliedKernels runs CPALS on an MTTKRPer from outside and
// counts its calls: N per iteration, one more per line-search trial.
func TestCPALSSuppliedKernels(t *testing.T) {
	p := plantedCP([]int{12, 13, 14}, 2, 0.5, 3)
	cpu, err := NewCPU(p.x, []string{"csf"}, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	k := &countingMTTKRP{inner: cpu}
	res, err := CPALS(p.x, Options{Rank: 2, Iters: 4, MTTKRP: k})
	if err != nil {
		t.Fatal(err)
	}
	if k.calls != 12 || res.Iterations != 4 {
		t.Fatalf("%d calls in %d iterations, want 12 in 4", k.calls, res.Iterations)
	}
	k.calls = 0
	if _, err := CPALS(p.x, Options{Rank: 2, Iters: 4, MTTKRP: k, LineSearch: true}); err != nil {
		t.Fatal(err)
	}
	if k.calls != 15 {
		t.Fatalf("%d calls with line search, want 15", k.calls)
	}
}

// TestFMS checks the score on permuted, rescaled and perturbed models.
func TestFMS(t *testing.T) {
	p := plantedCP([]int{8, 9, 10}, 3, 0.6, 1)
	perm := []int{2, 0, 1}
	fs := make([]*kernels.Matrix, 3)
	for m, a := range p.factors {
		fs[m] = kernels.NewMatrix(a.Rows, 3)
		for i := range a.Rows {
			for r, src := range perm {
				fs[m].Data[i*3+r] = a.At(i, src) * float32(m+1)
			}
		}
	}
	lambda := []float64{1.0 / 6, 1.0 / 6, 1.0 / 6}
	s, err := FMS(fs, lambda, p.factors, p.lambda)
	if err != nil || math.Abs(s-1) > 1e-6 {
		t.Fatalf("permuted, rescaled: %v %v", s, err)
	}
	lambda[0] = 0.5 / 6
	s, _ = FMS(fs, lambda, p.factors, p.lambda)
	if math.Abs(s-(2+0.5)/3) > 1e-6 {
		t.Fatalf("one weight halved: %v, want %v", s, 2.5/3)
	}
	s, _ = FMS(fs, nil, p.factors, nil)
	if math.Abs(s-1) > 1e-6 {
		t.Fatalf("weights ignored: %v", s)
	}
	if _, err := FMS(fs[:2], nil, p.factors, nil); err == nil {
		t.Fatal("order mismatch accepted")
	}
}

// BenchmarkCPALS times CP-ALS iterations at rank 16 (conversion excluded)
// on the shared splatt_med tensor, when present, and on a random tensor of
// 10^6 nonzeros, in ALTO and CSF; s/iter is the reported metric.
func BenchmarkCPALS(b *testing.B) {
	tensors := []struct {
		name string
		x    func(b *testing.B) *formats.COO
	}{
		{"splatt_med", func(b *testing.B) *formats.COO { return realTensor(b, "splatt_med.tns") }},
		{"random1M", func(*testing.B) *formats.COO {
			return randomSparse([]int{2000, 3000, 4000}, 1e6/(2000.0*3000*4000), 1)
		}},
	}
	for _, tc := range tensors {
		for _, format := range []string{"alto", "csf"} {
			b.Run(tc.name+"/"+format, func(b *testing.B) {
				x := tc.x(b)
				cpu, err := NewCPU(x, []string{format}, "", 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := cpu.prepareMTTKRP(x, 16); err != nil {
					b.Fatal(err)
				}
				const iters = 5
				var iterSeconds float64
				b.ResetTimer()
				for range b.N {
					res, err := CPALS(x, Options{Rank: 16, Iters: iters, MTTKRP: cpu})
					if err != nil {
						b.Fatal(err)
					}
					for _, h := range res.History {
						iterSeconds += h.Seconds
					}
				}
				b.ReportMetric(iterSeconds/float64(iters*b.N), "s/iter")
			})
		}
	}
}

// A cancelled Context stops each method before its next mode's update:
// it returns the context's error beside the model of the iterations done,
// or no model before the first is done.
func TestDecompositionsStop(t *testing.T) {
	x := randomSparse([]int{9, 10, 11}, 0.2, 3)
	methods := []struct {
		name string
		run  func(Options) (iters int, fit float64, err error)
	}{
		{"CP-ALS", func(o Options) (int, float64, error) {
			r, err := CPALS(x, o)
			if r == nil {
				return -1, 0, err
			}
			return r.Iterations, r.Fit, err
		}},
		{"CP-APR", func(o Options) (int, float64, error) {
			r, err := CPAPR(x, o)
			if r == nil {
				return -1, 0, err
			}
			return r.Iterations, r.LogLikelihood, err
		}},
		{"Tucker", func(o Options) (int, float64, error) {
			o.Ranks = []int{2, 2, 2}
			r, err := TuckerHOOI(x, o)
			if r == nil {
				return -1, 0, err
			}
			// The core fits the factors returned: ‖G‖² = ‖X‖² (1 - fit)²
			// is what the iteration that made them reported.
			var g2 float64
			for _, g := range r.Core {
				g2 += g * g
			}
			nx := math.Sqrt(normSq(x))
			return r.Iterations, 1 - math.Sqrt(max(0, nx*nx-g2))/nx, err
		}},
	}
	for _, m := range methods {
		for _, after := range []int{0, 2} {
			ctx, cancel := context.WithCancel(context.Background())
			if after == 0 {
				cancel()
			}
			var hist []IterStat
			o := Options{Rank: 2, Iters: 10, Tol: 0, Context: ctx, Init: InitRandom, Progress: func(s IterStat) {
				hist = append(hist, s)
				if len(hist) == after {
					cancel()
				}
			}}
			n, fit, err := m.run(o)
			switch {
			case !errors.Is(err, context.Canceled) || len(hist) != after:
				t.Errorf("%s, cancelled after %d: error %v, %d iterations reported", m.name, after, err, len(hist))
			case after == 0 && n != -1:
				t.Errorf("%s: a model of %d iterations, none done", m.name, n)
			case after > 0 && n != after:
				t.Errorf("%s: a model of %d iterations, %d done", m.name, n, after)
			case after > 0 && m.name != "CP-ALS" && math.Abs(fit-hist[after-1].Fit-hist[after-1].LogLikelihood) > 1e-6*math.Max(1, math.Abs(fit)):
				t.Errorf("%s: the model's figure %v, its last iteration's %v", m.name, fit, hist[after-1])
			}
			cancel()
		}
	}
}

// errAfter is a context whose Err is context.Canceled from its n-th call
// on: it stops a method between two modes of an iteration.
type errAfter struct {
	context.Context
	n int
}

func (c *errAfter) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

// Stopped in the middle of an iteration, Tucker returns the factors of the
// iteration before, which its core fits; CP-ALS the model as it stands.
func TestDecompositionsStopMidIteration(t *testing.T) {
	x := randomSparse([]int{9, 10, 11}, 0.2, 3)
	o := Options{Ranks: []int{2, 2, 2}, Iters: 10, Tol: 0, Init: InitRandom}
	o.Context = &errAfter{context.Background(), 7} // iteration 3, before mode 1
	atEnd, err := TuckerHOOI(x, o)
	if !errors.Is(err, context.Canceled) || atEnd == nil || atEnd.Iterations != 2 {
		t.Fatalf("stopped after two iterations: %v", err)
	}
	o.Context = &errAfter{context.Background(), 8} // iteration 3, before mode 2
	mid, err := TuckerHOOI(x, o)
	if !errors.Is(err, context.Canceled) || mid == nil || mid.Iterations != 2 {
		t.Fatalf("stopped in the third: %v", err)
	}
	for n := range mid.Factors {
		if !slices.Equal(mid.Factors[n].Data, atEnd.Factors[n].Data) {
			t.Errorf("mode %d: the factor of the unfinished iteration, not the one its core fits", n+1)
		}
	}
	if !slices.Equal(mid.Core, atEnd.Core) {
		t.Errorf("cores differ")
	}
	o = Options{Rank: 2, Iters: 10, Tol: 0, Init: InitRandom, Context: &errAfter{context.Background(), 8}}
	cp, err := CPALS(x, o)
	if !errors.Is(err, context.Canceled) || cp == nil || cp.Iterations != 2 || len(cp.Factors) != 3 {
		t.Fatalf("CP-ALS stopped in the third iteration: %v", err)
	}
}

// CP-ALS does not depend on the data's scale: the same tensor times 1e-25
// or 1e25 has the same fit. At 1e-25 the factors' normalisation used to
// leave one factor at the data's scale and the next MTTKRP underflowed
// float32: a fit of 0, "converged".
func TestCPALSScaleFree(t *testing.T) {
	x := randomSparse([]int{20, 15, 10}, 0.2, 7)
	fitAt := func(scale float64) float64 {
		y := x.Clone()
		for k, v := range y.Vals {
			y.Vals[k] = float32(float64(v) * scale)
		}
		res, err := CPALS(y, Options{Rank: 3, Iters: 15, Tol: 0, Seed: 2})
		if err != nil {
			t.Fatalf("scale %g: %v", scale, err)
		}
		return res.Fit
	}
	want := fitAt(1)
	for _, scale := range []float64{1e-30, 1e-25, 1e-12, 1e12, 1e30} {
		if got := fitAt(scale); math.Abs(got-want) > 1e-3 {
			t.Errorf("scale %g: fit %.6f, at 1: %.6f", scale, got, want)
		}
	}
}

// stoppingKernels are CPU kernels that, like EngineKernels on a cancelled
// context, fail their at-th MTTKRP with the context's error.
type stoppingKernels struct {
	*CPU
	cancel    context.CancelFunc
	ctx       context.Context
	calls, at int
}

func (k *stoppingKernels) MTTKRP(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error {
	if k.calls++; k.calls == k.at {
		k.cancel()
		return fmt.Errorf("mttkrp: %w", k.ctx.Err())
	}
	return k.CPU.MTTKRP(mode, factors, out)
}

// Kernels that stop on the method's Context inside an update are a stop,
// not a failure: the model of the iterations done comes back.
func TestCPALSStopsInsideKernels(t *testing.T) {
	x := randomSparse([]int{9, 10, 11}, 0.2, 3)
	cpu, err := NewCPU(x, nil, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := &stoppingKernels{CPU: cpu, cancel: cancel, ctx: ctx, at: 8} // iteration 3, mode 2
	res, err := CPALS(x, Options{Rank: 2, Iters: 10, Tol: 0, Init: InitRandom, Context: ctx, MTTKRP: k})
	if !errors.Is(err, context.Canceled) || res == nil || res.Iterations != 2 {
		t.Fatalf("error %v, result %v", err, res)
	}
}

// TestFitWithDuplicates: a COO holding one value as two duplicate
// nonzeros is the tensor holding their sum (as every kernel reads it), so
// CP-ALS and Tucker report the same fit for both; squaring each
// duplicate gave a fit of another tensor (0.798 against 0.775 here).
func TestFitWithDuplicates(t *testing.T) {
	build := func(split bool) *formats.COO {
		x, _ := formats.NewCOO([]int{4, 3, 2}, 0)
		a, b, c := []float32{1, 2, 3, 4}, []float32{1, 1, 2}, []float32{1, 3}
		for i := range 4 {
			for j := range 3 {
				for k := range 2 {
					v, at := a[i]*b[j]*c[k], []uint32{uint32(i), uint32(j), uint32(k)}
					switch {
					case i+j+k > 0:
						x.Append(at, v)
					case split:
						x.Append(at, 10)
						x.Append(at, v)
					default:
						x.Append(at, v+10)
					}
				}
			}
		}
		return x
	}
	var fits [2][2]float64
	for s, split := range []bool{false, true} {
		x := build(split)
		cp, err := CPALS(x, Options{Rank: 1, Iters: 50, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := TuckerHOOI(x, Options{Ranks: []int{1, 1, 1}, Iters: 20})
		if err != nil {
			t.Fatal(err)
		}
		fits[s] = [2]float64{cp.Fit, tk.Fit}
	}
	for m, name := range []string{"CP-ALS", "Tucker"} {
		if math.Abs(fits[0][m]-fits[1][m]) > 1e-5 {
			t.Errorf("%s: fit %.6f with the value summed, %.6f with it as two duplicates", name, fits[0][m], fits[1][m])
		}
	}
}

// shortData returns fs with one value cut from mode 2's matrix.
func shortData(fs []*kernels.Matrix) []*kernels.Matrix {
	fs[1].Data = fs[1].Data[:len(fs[1].Data)-1]
	return fs
}

// TestKernelsOfAnotherTensor: kernels built for one tensor and given to
// a decomposition of another (of the same dims) are refused; they would
// answer with the first tensor's MTTKRPs and TTMs.
func TestKernelsOfAnotherTensor(t *testing.T) {
	x, y := randomSparse([]int{6, 5, 4}, 0.3, 1), randomSparse([]int{6, 5, 4}, 0.3, 2)
	cpu, err := NewCPU(y, nil, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CPALS(x, Options{Rank: 2, MTTKRP: cpu}); !errors.Is(err, errOtherTensor) {
		t.Errorf("CP-ALS: %v, want %v", err, errOtherTensor)
	}
	if _, err := TuckerHOOI(x, Options{Ranks: []int{2, 2, 2}, TTMChain: cpu}); !errors.Is(err, errOtherTensor) {
		t.Errorf("Tucker: %v, want %v", err, errOtherTensor)
	}
	if _, err := CPALS(y, Options{Rank: 2, MTTKRP: cpu}); err != nil {
		t.Errorf("CP-ALS of the kernels' own tensor: %v", err)
	}
}
