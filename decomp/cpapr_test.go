package decomp

import (
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/hetero/heterotest"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// poisson draws a Poisson variate of mean mu by inversion (sequential
// search), exact for the small means the tests use.
func poisson(rng *rand.Rand, mu float64) int {
	u := rng.Float64()
	p := math.Exp(-mu)
	c := p
	k := 0
	for u > c && k < 10000 {
		k++
		p *= mu / float64(k)
		c += p
	}
	return k
}

// plantedPoisson samples counts from a planted non-negative CP model with
// sparse column supports (see plantedCP), scaled by scale: every cell of
// the model's support gets a Poisson count, zero counts are not stored.
func plantedPoisson(dims []int, R int, frac, scale float64, seed uint64) planted {
	p := plantedCP(dims, R, frac, seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	x, _ := formats.NewCOO(dims, p.x.NNZ())
	idx := make([]uint32, len(dims))
	for k, v := range p.x.Vals {
		c := poisson(rng, scale*float64(v))
		if c == 0 {
			continue
		}
		p.x.Coord(k, idx)
		x.Append(idx, float32(c))
	}
	for r := range p.lambda {
		p.lambda[r] = scale
	}
	p.x = x
	return p
}

func TestCPAPRPlanted(t *testing.T) {
	cases := []struct {
		name  string
		dims  []int
		rank  int
		scale float64
	}{
		{"order3", []int{30, 40, 50}, 3, 10},
		{"order3-sparse-counts", []int{30, 40, 50}, 2, 1},
		{"order4", []int{10, 12, 14, 16}, 3, 5},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := plantedPoisson(c.dims, c.rank, 0.3, c.scale, uint64(i+1))
			var lls []float64
			res, err := CPAPR(p.x, Options{Rank: c.rank, Iters: 200, Tol: 1e-4, Seed: 2, Threads: 2,
				Progress: func(s IterStat) { lls = append(lls, s.LogLikelihood) }})
			if err != nil {
				t.Fatal(err)
			}
			checkFinite(t, res.Factors, res.Lambda)
			fms, err := FMS(res.Factors, res.Lambda, p.factors, p.lambda)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("nnz %d, %d iterations, loglik %.6e (first %.6e), kkt %.2e, fms %.4f", p.x.NNZ(), res.Iterations,
				res.LogLikelihood, lls[0], res.KKTViolation, fms)
			if fms < 0.9 {
				t.Fatalf("fms %.4f, want ≥ 0.9", fms)
			}
			for k := 1; k < len(lls); k++ {
				if lls[k] < lls[k-1]-1e-9*math.Abs(lls[k-1]) {
					t.Fatalf("log-likelihood dropped at iteration %d: %v -> %v", k+1, lls[k-1], lls[k])
				}
			}
			// Non-negative factors with columns summing to 1, λ sorted.
			for m, f := range res.Factors {
				sums := make([]float64, c.rank)
				for k, v := range f.Data {
					if v < 0 {
						t.Fatalf("mode %d: negative entry %v", m+1, v)
					}
					sums[k%c.rank] += float64(v)
				}
				for r, s := range sums {
					if math.Abs(s-1) > 1e-4 {
						t.Fatalf("mode %d column %d sums to %v", m+1, r, s)
					}
				}
			}
			if !slices.IsSortedFunc(res.Lambda, func(a, b float64) int { return int(math.Copysign(1, b-a)) }) {
				t.Fatalf("lambda not sorted: %v", res.Lambda)
			}
			// The model's total is the data's (a property of the MU fixed
			// point with column sums 1).
			var total float64
			for _, v := range p.x.Vals {
				total += float64(v)
			}
			var sum float64
			for _, l := range res.Lambda {
				sum += l
			}
			if math.Abs(sum-total) > 1e-3*total {
				t.Fatalf("Σλ = %v, Σx = %v", sum, total)
			}
		})
	}
}

// TestCPAPRPhiMatchesDense holds Φ to its definition computed densely, and
// the log-likelihood to a dense evaluation over the nonzeros.
func TestCPAPRPhiMatchesDense(t *testing.T) {
	x := randomSparse([]int{4, 5, 6}, 0.4, 3)
	R := 3
	init := randomFactors(x.Dims, []int{R, R, R}, 4)
	for _, threads := range []int{1, 3} {
		s := &aprState{x: x, o: Options{Rank: R, Threads: threads, APR: APROptions{EpsDivZero: 1e-10}}.resolve(), N: 3, R: R}
		s.o.APR.EpsDivZero = 1e-10
		s.o.APR.Format = PhiAuto // both layouts
		if err := s.setup(init); err != nil {
			t.Fatal(err)
		}
		for n := range 3 {
			b := make([]float64, len(s.a[n]))
			for k := range b {
				b[k] = float64(k%7) * 0.1
			}
			want := make([]float64, len(b))
			d := dense(x)
			c := 0
			forEachCell(x.Dims, func(i []int) {
				v := d[c]
				c++
				if v == 0 {
					return
				}
				pi := make([]float64, R)
				var m float64
				for r := range R {
					pi[r] = 1
					for q := range 3 {
						if q != n {
							pi[r] *= s.a[q][i[q]*R+r]
						}
					}
					m += b[i[n]*R+r] * pi[r]
				}
				for r := range R {
					want[i[n]*R+r] += v / math.Max(m, 1e-10) * pi[r]
				}
			})
			for _, cache := range []bool{true, false} {
				if cache {
					s.pi = make([]float64, x.NNZ()*R)
					s.fillPi(n)
				} else {
					s.pi = nil
				}
				got := make([]float64, len(b))
				s.computePhi(n, b, got)
				for k := range got {
					if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
						t.Fatalf("threads %d mode %d cache %v: Φ[%d] = %v, want %v", threads, n+1, cache, k, got[k], want[k])
					}
				}
			}
			// The CSF form, over the tree rooted at the mode.
			got := make([]float64, len(b))
			for k := range got {
				got[k] = math.NaN() // every row must be written
			}
			s.csf[n].compute(s.a, b, got, R, 1e-10)
			for k := range got {
				if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
					t.Fatalf("threads %d mode %d csf: Φ[%d] = %v, want %v", threads, n+1, k, got[k], want[k])
				}
			}
		}
		// Log-likelihood against the definition.
		model := make([]*kernels.Matrix, 3)
		for m := range 3 {
			model[m] = kernels.NewMatrix(x.Dims[m], R)
			for k, v := range s.a[m] {
				model[m].Data[k] = float32(v)
			}
		}
		var want float64
		for k, v := range x.Vals {
			var m float64
			for r := range R {
				p := s.lambda[r]
				for q := range 3 {
					p *= s.a[q][int(x.Inds[q][k])*R+r]
				}
				m += p
			}
			want += float64(v) * math.Log(m)
		}
		for _, l := range s.lambda {
			want -= l
		}
		if got := s.logLikelihood(); math.Abs(got-want) > 1e-9*math.Abs(want) {
			t.Fatalf("log-likelihood %v, want %v", got, want)
		}
	}
}

// TestCPAPRRealTensor runs a few outer iterations on a real count tensor.
func TestCPAPRRealTensor(t *testing.T) {
	x := realTensor(t, "kg_nations.tns")
	res, err := CPAPR(x, Options{Rank: 4, Iters: 8, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k < len(res.History); k++ {
		if res.History[k].LogLikelihood < res.History[k-1].LogLikelihood-1e-9*math.Abs(res.History[k-1].LogLikelihood) {
			t.Fatalf("log-likelihood dropped: %+v", res.History)
		}
	}
	if res.Iterations != 8 || math.IsNaN(res.LogLikelihood) || res.LogLikelihood >= 0 {
		t.Fatalf("%d iterations, log-likelihood %v", res.Iterations, res.LogLikelihood)
	}
	checkFinite(t, res.Factors, res.Lambda)
}

func TestCPAPRDeterministic(t *testing.T) {
	p := plantedPoisson([]int{15, 16, 17}, 2, 0.4, 3, 5)
	opts := Options{Rank: 3, Iters: 5, Seed: 9, Threads: 2}
	a, err := CPAPR(p.x, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CPAPR(p.x, opts)
	if a.LogLikelihood != b.LogLikelihood || !slices.Equal(a.Factors[2].Data, b.Factors[2].Data) {
		t.Fatal("two runs differ")
	}
}

// TestCPAPRDegenerate: more components than the data supports, and a
// single nonzero, must stay finite.
func TestCPAPRDegenerate(t *testing.T) {
	one, _ := formats.NewCOO([]int{3, 4, 5}, 1)
	one.Append([]uint32{0, 1, 2}, 3)
	for _, x := range []*formats.COO{one, plantedPoisson([]int{6, 7, 8}, 1, 0.5, 2, 1).x} {
		res, err := CPAPR(x, Options{Rank: 6, Iters: 20})
		if err != nil {
			t.Fatal(err)
		}
		checkFinite(t, res.Factors, res.Lambda)
		if math.IsNaN(res.LogLikelihood) || math.IsInf(res.LogLikelihood, 0) || math.IsNaN(res.KKTViolation) {
			t.Fatalf("log-likelihood %v, kkt %v", res.LogLikelihood, res.KKTViolation)
		}
	}
}

func TestCPAPRErrors(t *testing.T) {
	x := randomSparse([]int{4, 5, 6}, 0.3, 1)
	neg := x.Clone()
	neg.Vals[2] = -1
	negInit := randomFactors(x.Dims, []int{2, 2, 2}, 1)
	negInit[1].Data[3] = -0.5
	cases := []struct {
		name string
		x    *formats.COO
		opts Options
		want string
	}{
		{"negative value", neg, Options{Rank: 2}, "the nonzero at " + oneBased(neg, 2) + " has value -1: CP-APR models counts"},
		{"rank 0", x, Options{Rank: 0}, "rank must be >= 1"},
		{"hosvd", x, Options{Rank: 2, Init: InitHOSVD}, "init must be random"},
		{"negative init", x, Options{Rank: 2, InitFactors: negInit}, "negative entry"},
		{"negative inner", x, Options{Rank: 2, APR: APROptions{InnerIters: -1}}, "inner iterations"},
		{"epsilon NaN", x, Options{Rank: 2, APR: APROptions{EpsDivZero: math.NaN()}}, "found 0, 0, NaN, 0"},
		{"epsilon Inf", x, Options{Rank: 2, APR: APROptions{EpsDivZero: math.Inf(1)}}, "all finite"},
		{"kappa NaN", x, Options{Rank: 2, APR: APROptions{Kappa: math.NaN()}}, "kappa a number"},
		{"kappa -Inf", x, Options{Rank: 2, APR: APROptions{Kappa: math.Inf(-1)}}, "kappa a number"},
		{"kappa tolerance NaN", x, Options{Rank: 2, APR: APROptions{KappaTol: math.NaN()}}, "kappa tolerance"},
	}
	for _, c := range cases {
		_, err := CPAPR(c.x, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line containing %q", c.name, err, c.want)
		}
	}
}

// TestCPAPRPhiForms holds the CSF form of Φ to the COO form on tensors of
// orders 2 to 5 with repeated coordinates, for every mode and thread
// count.
func TestCPAPRPhiForms(t *testing.T) {
	for _, dims := range [][]int{{7, 9}, {5, 6, 7}, {4, 3, 5, 6}, {3, 4, 2, 5, 3}} {
		x := randomSparse(dims, 0.3, uint64(len(dims)))
		// Repeat some coordinates: CSF keeps them as separate leaves.
		k := x.NNZ()
		for m := range x.Inds {
			x.Inds[m] = append(x.Inds[m], x.Inds[m][:k/3]...)
		}
		x.Vals = append(x.Vals, x.Vals[:k/3]...)
		R := 4
		ranks := make([]int, len(dims))
		for m := range ranks {
			ranks[m] = R
		}
		init := randomFactors(dims, ranks, 9)
		for _, threads := range []int{1, 3} {
			s := &aprState{x: x, o: Options{Rank: R, Threads: threads}.resolve(), N: len(dims), R: R}
			s.o.APR.EpsDivZero = 1e-10
			s.o.APR.Format = PhiAuto // both layouts
			if err := s.setup(init); err != nil {
				t.Fatal(err)
			}
			for n := range dims {
				b := make([]float64, len(s.a[n]))
				for k := range b {
					b[k] = float64(k%5+1) * 0.2
				}
				want, got := make([]float64, len(b)), make([]float64, len(b))
				s.pi = nil
				s.computePhi(n, b, want)
				s.csf[n].compute(s.a, b, got, R, 1e-10)
				for k := range got {
					if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
						t.Fatalf("dims %v threads %d mode %d: csf Φ[%d] = %v, coo %v", dims, threads, n+1, k, got[k], want[k])
					}
				}
			}
		}
	}
}

// TestCPAPRFormats runs CP-APR with each Φ form: the same model to
// rounding, and the forms reported.
func TestCPAPRFormats(t *testing.T) {
	p := plantedPoisson([]int{30, 40, 20}, 3, 0.2, 20, 5)
	var lls []float64
	for _, f := range []string{PhiCOO, PhiCSF, PhiAuto} {
		res, err := CPAPR(p.x, Options{Rank: 3, Iters: 15, Seed: 2, APR: APROptions{Format: f}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(res.PhiFormats) != 3 {
			t.Fatalf("%s: PhiFormats %v", f, res.PhiFormats)
		}
		for _, got := range res.PhiFormats {
			if (f != PhiAuto && got != f) || (got != PhiCOO && got != PhiCSF) {
				t.Fatalf("format %s: PhiFormats %v", f, res.PhiFormats)
			}
		}
		lls = append(lls, res.LogLikelihood)
	}
	for i, ll := range lls[1:] {
		if math.Abs(ll-lls[0]) > 1e-6*math.Abs(lls[0]) {
			t.Errorf("log-likelihoods by form (coo, csf, auto): %v (form %d)", lls, i+1)
		}
	}
	if _, err := CPAPR(p.x, Options{Rank: 3, APR: APROptions{Format: "hicoo"}}); err == nil {
		t.Error("Φ format hicoo accepted")
	}
}

// TestCPAPRDevice runs CP-APR with Φ on each accelerator (the fake, and
// PoCL where there is one): the model of the CPU run to float32's
// rounding. A device failing mid-run leaves the run to the CPU, with a
// warning, and the same model.
func TestCPAPRDevice(t *testing.T) {
	p := plantedPoisson([]int{30, 40, 20}, 3, 0.2, 20, 6)
	opts := Options{Rank: 3, Iters: 10, Seed: 2, Tol: 0}
	cpu, err := CPAPR(p.x, opts)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, res *CPResult) {
		t.Helper()
		if d := math.Abs(res.LogLikelihood - cpu.LogLikelihood); !(d <= 1e-4*math.Abs(cpu.LogLikelihood)) {
			t.Errorf("%s: log-likelihood %v, CPU %v", what, res.LogLikelihood, cpu.LogLikelihood)
		}
		for m, f := range res.Factors {
			for k, v := range f.Data {
				if math.Abs(float64(v-cpu.Factors[m].Data[k])) > 1e-3 {
					t.Fatalf("%s: factor %d entry %d = %v, CPU %v", what, m+1, k, v, cpu.Factors[m].Data[k])
				}
			}
		}
	}
	for _, dev := range heterotest.Accelerators(t) {
		pd, ok := dev.(hetero.PhiDevice)
		if !ok {
			t.Fatalf("%s computes no Φ", dev.Info().Name)
		}
		o := opts
		o.APR.Device = pd
		res, err := CPAPR(p.x, o)
		if err != nil {
			t.Fatalf("%s: %v", dev.Info().Name, err)
		}
		want := "coo@" + dev.Info().Name
		if !slices.Equal(res.PhiFormats, []string{want, want, want}) || len(res.Warnings) != 0 {
			t.Errorf("%s: formats %v, warnings %v", dev.Info().Name, res.PhiFormats, res.Warnings)
		}
		near(dev.Info().Name, res)
	}
	fake := heterotest.NewAccelerator()
	fake.FailRun = 25 // in the first outer iteration's third mode
	o := opts
	o.APR.Device = fake
	res, err := CPAPR(p.x, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "the CPU computes it from here on") || !slices.Equal(res.PhiFormats, []string{PhiCOO, PhiCOO, PhiCOO}) {
		t.Fatalf("failing device: warnings %q, formats %v", res.Warnings, res.PhiFormats)
	}
	near("failing device", res)
	bad := heterotest.NewAccelerator()
	bad.FailBind = true
	o.APR.Device = bad
	if _, err := CPAPR(p.x, o); err == nil || !strings.Contains(err.Error(), "injected bind failure") {
		t.Errorf("failing bind: %v", err)
	}
}

// CP-APR says so when values far below one count make its stopping test
// (the Tensor Toolbox's, on factors weighted by λ) pass at once.
func TestCPAPRWarnsBelowCounts(t *testing.T) {
	x := randomSparse([]int{6, 7, 8}, 0.3, 4)
	for k := range x.Vals {
		x.Vals[k] = float32(1 + k%3)
	}
	small := x.Clone()
	for k := range small.Vals {
		small.Vals[k] *= 1e-10
	}
	for _, c := range []struct {
		x    *formats.COO
		warn bool
	}{{x, false}, {small, true}} {
		res, err := CPAPR(c.x, Options{Rank: 2, Iters: 3, Tol: 1e-4})
		if err != nil {
			t.Fatal(err)
		}
		warned := slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "scale the values to counts") })
		if warned != c.warn {
			t.Errorf("largest value %v: warnings %q", slices.Max(c.x.Vals), res.Warnings)
		}
	}
}
