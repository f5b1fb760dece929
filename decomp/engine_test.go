package decomp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/engine"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/hetero/heterotest"
	"github.com/sparsetune/sparsetune/kernels"
)

// cpalsOnEngine runs CP-ALS with its MTTKRPs from the engine.
func cpalsOnEngine(t *testing.T, e *engine.Engine, x *formats.COO, o Options) (*CPResult, *EngineKernels) {
	t.Helper()
	k, err := NewEngineKernels(context.Background(), e, x, o.Rank)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	o.MTTKRP = k
	res, err := CPALS(x, o)
	if err != nil {
		t.Fatal(err)
	}
	return res, k
}

// TestCPALSEngineMatchesCPU: CP-ALS with the engine's MTTKRPs reaches the
// fit of the default CPU kernels within 1e-3 on real tensors, for every
// split and accelerator (formats as the rule predicts them per device),
// plans every mode up front, and runs each N times per iteration.
func TestCPALSEngineMatchesCPU(t *testing.T) {
	names := []string{"kg_nations.tns", "kg_umls.tns", "kg_jf17k_4.tns"}
	if testing.Short() {
		names = names[:1]
	}
	const iters = 8
	for _, name := range names {
		x := realTensor(t, name)
		o := Options{Rank: 8, Iters: iters, Seed: 1}
		want, err := CPALS(x, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, acc := range heterotest.Accelerators(t) {
			for _, s := range []hetero.Strategy{hetero.SplitPeak, hetero.SplitDynamic, hetero.SplitRandom, hetero.SplitCPU, hetero.SplitAcc} {
				what := fmt.Sprintf("%s on cpu+%s, split %s", name, acc.Info().Name, s)
				e, err := engine.New([]hetero.Device{hetero.NewCPU(0), acc}, engine.Options{Split: s, Profile: heterotest.Profile("cpu", acc.Info().Name), Seed: 2})
				if err != nil {
					t.Fatal(err)
				}
				got, k := cpalsOnEngine(t, e, x, o)
				t.Logf("%s: fit %.6f, the CPU path's %.6f; formats %v", what, got.Fit, want.Fit, k.Modes()[0].Devices)
				if d := math.Abs(got.Fit - want.Fit); !(d <= 1e-3) {
					t.Errorf("%s: fit %.6f, the CPU path's %.6f", what, got.Fit, want.Fit)
				}
				if got.Iterations != iters || got.SetupSeconds <= 0 {
					t.Errorf("%s: %d iterations, setup %v s", what, got.Iterations, got.SetupSeconds)
				}
				checkFinite(t, got.Factors, got.Lambda)
				modes := k.Modes()
				if len(modes) != x.Order() {
					t.Fatalf("%s: %d mode reports", what, len(modes))
				}
				for _, m := range modes {
					if m.Runs != iters || m.Split != s.String() || len(m.Devices) != 2 {
						t.Errorf("%s: mode %d ran %d times, split %s, %d devices", what, m.Mode, m.Runs, m.Split, len(m.Devices))
					}
					for _, d := range m.Devices {
						// A device dealt nothing may have decided no format.
						if d.Format == "" && d.NNZShare > 0 || d.Format != "" && d.FormatSource != engine.SourcePredicted || d.Failed != "" {
							t.Errorf("%s: mode %d: %+v", what, m.Mode, d)
						}
					}
				}
				if ws := k.Warnings(); len(ws) > 0 {
					t.Logf("%s: warnings %q", what, ws)
				}
			}
		}
	}
}

// TestCPALSEngineFailure: an accelerator failing mid-decomposition has its
// work redone on the CPU: the fit is the CPU path's, and a warning says
// what happened.
func TestCPALSEngineFailure(t *testing.T) {
	p := plantedCP([]int{30, 25, 20}, 3, 0.4, 5)
	o := Options{Rank: 3, Iters: 6, Seed: 1}
	want, err := CPALS(p.x, o)
	if err != nil {
		t.Fatal(err)
	}
	fake := heterotest.NewAccelerator()
	fake.FailRun = 5 // the second iteration's second mode
	e, err := engine.New([]hetero.Device{hetero.NewCPU(0), fake}, engine.Options{Split: hetero.SplitPeak, Profile: heterotest.Profile("cpu", "fake:0")})
	if err != nil {
		t.Fatal(err)
	}
	got, k := cpalsOnEngine(t, e, p.x, o)
	if d := math.Abs(got.Fit - want.Fit); !(d <= 1e-3) {
		t.Errorf("fit %.6f, the CPU path's %.6f", got.Fit, want.Fit)
	}
	if !strings.Contains(strings.Join(k.Warnings(), "\n"), "fake:0 failed") {
		t.Errorf("warnings %q do not report the failure", k.Warnings())
	}
	failed := 0
	for _, m := range k.Modes() {
		if m.Devices[1].Failed != "" {
			failed++
		}
	}
	if failed != p.x.Order() {
		t.Errorf("%d of %d modes report the accelerator failed", failed, p.x.Order())
	}
}

// TestEngineKernelsErrors: bad arguments and use after Close give one-line
// errors.
func TestEngineKernelsErrors(t *testing.T) {
	p := plantedCP([]int{8, 7, 6}, 2, 0.5, 1)
	e, err := engine.New(nil, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := NewEngineKernels(ctx, nil, p.x, 2); err == nil {
		t.Error("nil engine accepted")
	}
	if _, err := NewEngineKernels(ctx, e, p.x, 0); err == nil || !strings.Contains(err.Error(), "rank must be") {
		t.Errorf("rank 0: %v", err)
	}
	k, err := NewEngineKernels(ctx, e, p.x, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CPALS(p.x, Options{Rank: 3, Iters: 1, MTTKRP: k}); err == nil || !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("rank mismatch: %v", err)
	}
	if _, err := CPALS(p.x.Clone(), Options{Rank: 2, Iters: 1, MTTKRP: k}); !errors.Is(err, errOtherTensor) {
		t.Errorf("kernels of another tensor: %v", err)
	}
	fs := randomFactors(p.x.Dims, []int{2, 2, 2}, 1)
	out := kernels.NewMatrix(8, 2)
	if err := k.MTTKRP(0, fs, out); err != nil {
		t.Fatal(err)
	}
	if err := k.MTTKRP(0, fs[:2], out); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("two factors: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.MTTKRP(0, fs, out); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after close: %v", err)
	}
}

// TestTuckerEngineMatchesCPU: Tucker-HOOI with the TTM chains' SpTTMs on
// the engine (the contracted mode's fiber matrix sliced by the output
// mode, split between the CPU and an accelerator) gives each chain the
// CPU path's values, and so its fit, for every split; each mode's chain
// is planned once and runs once per iteration.
func TestTuckerEngineMatchesCPU(t *testing.T) {
	x := realTensor(t, "kg_umls.tns")
	const iters = 4
	o := Options{Ranks: []int{4, 3, 5}, Iters: iters, Seed: 1}
	want, err := TuckerHOOI(x, o)
	if err != nil {
		t.Fatal(err)
	}
	// One chain's values against the CPU's, on the same factors.
	cpu, err := NewCPU(x, nil, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, acc := range heterotest.Accelerators(t) {
		for _, s := range []hetero.Strategy{hetero.SplitPeak, hetero.SplitDynamic, hetero.SplitRandom, hetero.SplitAcc} {
			what := fmt.Sprintf("cpu+%s, split %s", acc.Info().Name, s)
			e, err := engine.New([]hetero.Device{hetero.NewCPU(0), acc}, engine.Options{Split: s, Profile: heterotest.Profile("cpu", acc.Info().Name), Seed: 2})
			if err != nil {
				t.Fatal(err)
			}
			k, err := NewEngineKernels(context.Background(), e, x, 1)
			if err != nil {
				t.Fatal(err)
			}
			for n := range x.Order() {
				factors := make([]*kernels.Matrix, x.Order())
				P := 1
				for m := range x.Order() {
					if m != n {
						factors[m] = randomMatrix(x.Dims[m], o.Ranks[m], uint64(10*n+m))
						P *= o.Ranks[m]
					}
				}
				a, b := kernels.NewMatrix(x.Dims[n], P), kernels.NewMatrix(x.Dims[n], P)
				if err := cpu.TTMChain(n, factors, a); err != nil {
					t.Fatal(err)
				}
				if err := k.TTMChain(n, factors, b); err != nil {
					t.Fatalf("%s: chain of mode %d: %v", what, n+1, err)
				}
				for i := range a.Data {
					if d := math.Abs(float64(a.Data[i] - b.Data[i])); d > 1e-4*max(1, math.Abs(float64(a.Data[i]))) {
						t.Fatalf("%s: chain of mode %d, value %d: %v on the engine, %v on the CPU", what, n+1, i, b.Data[i], a.Data[i])
					}
				}
			}
			k.Close()
			k, err = NewEngineKernels(context.Background(), e, x, 1)
			if err != nil {
				t.Fatal(err)
			}
			o2 := o
			o2.TTMChain = k
			got, err := TuckerHOOI(x, o2)
			k.Close()
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Abs(got.Fit - want.Fit); !(d <= 1e-4) {
				t.Errorf("%s: fit %.6f, the CPU path's %.6f", what, got.Fit, want.Fit)
			}
			for _, m := range k.Modes() {
				if m.Runs < iters || m.Split != s.String() || len(m.Devices) != 2 {
					t.Errorf("%s: mode %d: %d runs, split %s, %d devices", what, m.Mode, m.Runs, m.Split, len(m.Devices))
				}
			}
		}
	}
}

// randomMatrix returns a rows x cols matrix of seeded values in [-1, 1).
func randomMatrix(rows, cols int, seed uint64) *kernels.Matrix {
	rng := rand.New(rand.NewPCG(seed, 7))
	m := kernels.NewMatrix(rows, cols)
	for i := range m.Data {
		m.Data[i] = 2*rng.Float32() - 1
	}
	return m
}
