package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/hetero/heterotest"
	"github.com/sparsetune/sparsetune/kernels"
)

// operandsFor draws op's operands of rank R from seed: Uᵀ for SpTTM, one
// factor per mode (the mode's own nil) for MTTKRP.
func operandsFor(op hetero.Op, x *formats.COO, mode, R int, seed uint64) []*kernels.Matrix {
	rng := rand.New(rand.NewPCG(seed, uint64(mode)))
	if op == hetero.SpTTM {
		return []*kernels.Matrix{randomMatrix(rng, x.Dims[mode], R)}
	}
	fs := make([]*kernels.Matrix, x.Order())
	for m, d := range x.Dims {
		if m != mode {
			fs[m] = randomMatrix(rng, d, R)
		}
	}
	return fs
}

func planFor(ctx context.Context, e *Engine, op hetero.Op, x *formats.COO, mode, R int) (*Plan, error) {
	if op == hetero.SpTTM {
		return e.PlanTTM(ctx, x, mode, R)
	}
	return e.PlanMTTKRP(ctx, x, mode, R)
}

// fresh computes op with the operands from scratch: a new plan, run once
// and closed. Not TTM or MTTKRP: a call that runs once
// weighs the tensor's upload in the split, so it may deal the slices
// otherwise and sum a row in another order.
func fresh(ctx context.Context, e *Engine, op hetero.Op, x *formats.COO, mode int, operands []*kernels.Matrix) (*Result, error) {
	R := operands[(mode+1)%len(operands)].Cols
	p, err := planFor(ctx, e, op, x, mode, R)
	if err != nil {
		return nil, err
	}
	res, err := p.Run(ctx, operands, nil)
	return res, errors.Join(err, p.Close())
}

// TestPlanReuse: one plan run with several operand sets, into one output
// matrix left dirty between runs, gives what a fresh call gives for each
// set (bit for bit where the same kernels run the same pieces), for every
// split, op and accelerator; the conversion is paid at planning only.
func TestPlanReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	// Squared index draws leave some output rows empty: Run must zero
	// them in a reused output.
	x := randomTensor(rng, []int{40, 35, 30}, 4000)
	ctx := context.Background()
	for _, acc := range heterotest.Accelerators(t) {
		for _, op := range hetero.Ops {
			for _, s := range []hetero.Strategy{hetero.SplitPeak, hetero.SplitDynamic, hetero.SplitRandom, hetero.SplitCPU, hetero.SplitAcc} {
				e, err := New([]hetero.Device{hetero.NewCPU(0), acc}, Options{Split: s, Profile: heterotest.Profile("cpu", acc.Info().Name), Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				mode, R := 1, 6
				what := fmt.Sprintf("%s split %s on cpu+%s", op, s, acc.Info().Name)
				p, err := planFor(ctx, e, op, x, mode, R)
				if err != nil {
					t.Fatalf("%s: plan: %v", what, err)
				}
				rows, cols := p.OutputShape()
				out := kernels.NewMatrix(rows, cols)
				exact := s != hetero.SplitDynamic && acc.Info().Name == "fake:0"
				for k, seed := range []uint64{5, 6, 7} {
					for i := range out.Data {
						out.Data[i] = float32(math.NaN())
					}
					operands := operandsFor(op, x, mode, R, seed)
					res, err := p.Run(ctx, operands, out)
					if err != nil {
						t.Fatalf("%s, run %d: %v", what, k+1, err)
					}
					want, err := fresh(ctx, e, op, x, mode, operands)
					if err != nil {
						t.Fatalf("%s, fresh call %d: %v", what, k+1, err)
					}
					if res.Y != out {
						t.Fatalf("%s, run %d: the result is not the given output", what, k+1)
					}
					if exact {
						for i, v := range out.Data {
							if v != want.Y.Data[i] {
								t.Fatalf("%s, run %d: value %d is %v, a fresh call gives %v", what, k+1, i, v, want.Y.Data[i])
							}
						}
					} else if e := relErr32(out.Data, want.Y.Data); !(e <= 1e-5) {
						t.Errorf("%s, run %d: relative error %.2e against a fresh call", what, k+1, e)
					}
					if e := relErr(out.Data, reference(t, op, x, mode, want, operands)); !(e <= 1e-4) {
						t.Errorf("%s, run %d: relative error %.2e against the reference", what, k+1, e)
					}
					var nnz int64
					for _, d := range res.Devices {
						nnz += d.NNZ
						if s != hetero.SplitDynamic && k > 0 && (d.ConvertSeconds != 0 || d.SetupSeconds != 0) {
							t.Errorf("%s, run %d: %s converted again (%v s, setup %v s)", what, k+1, d.Device, d.ConvertSeconds, d.SetupSeconds)
						}
						if d.Failed != "" {
							t.Errorf("%s, run %d: %s failed: %s", what, k+1, d.Device, d.Failed)
						}
					}
					if nnz != int64(x.NNZ()) {
						t.Errorf("%s, run %d: devices computed %d of %d nonzeros", what, k+1, nnz, x.NNZ())
					}
				}
				rep := p.Report()
				if rep.Strategy != s || len(rep.Devices) != 2 || rep.Seconds <= 0 {
					t.Errorf("%s: plan report %+v", what, rep)
				}
				if s != hetero.SplitDynamic {
					var bound int64
					for _, d := range rep.Devices {
						bound += d.NNZ
					}
					if bound != int64(x.NNZ()) {
						t.Errorf("%s: the plan bound %d of %d nonzeros", what, bound, x.NNZ())
					}
				}
				if err := p.Close(); err != nil {
					t.Errorf("%s: close: %v", what, err)
				}
			}
		}
	}
}

// TestPlanClosed: Run after Close is an error, and Close twice is not.
func TestPlanClosed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 3))
	x := randomTensor(rng, []int{10, 12, 14}, 300)
	ctx := context.Background()
	for _, op := range hetero.Ops {
		e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitRandom, Profile: heterotest.Profile("cpu", "fake:0")})
		if err != nil {
			t.Fatal(err)
		}
		p, err := planFor(ctx, e, op, x, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(ctx, operandsFor(op, x, 0, 3, 1), nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s: second close: %v", op, err)
		}
		if _, err := p.Run(ctx, operandsFor(op, x, 0, 3, 1), nil); err == nil || !strings.Contains(err.Error(), "after Close") {
			t.Errorf("%s: run after close: err = %v", op, err)
		}
	}
}

// TestPlanBadOperands: every wrong shape gives one line naming what was
// expected, and the plan still runs afterwards.
func TestPlanBadOperands(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 4))
	x := randomTensor(rng, []int{10, 12, 14}, 300)
	ctx := context.Background()
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := e.PlanTTM(ctx, x, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := e.PlanMTTKRP(ctx, x, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	defer pm.Close()
	for _, tc := range []struct {
		name     string
		p        *Plan
		operands []*kernels.Matrix
		out      *kernels.Matrix
		want     string
	}{
		{"ttm rank", pt, []*kernels.Matrix{kernels.NewMatrix(12, 3)}, nil, "Uᵀ must be Dims[2] x R = 12 x 4, found 12x3"},
		{"ttm rows", pt, []*kernels.Matrix{kernels.NewMatrix(10, 4)}, nil, "Uᵀ must be"},
		{"ttm count", pt, nil, nil, "0 operands"},
		{"ttm out", pt, []*kernels.Matrix{kernels.NewMatrix(12, 4)}, kernels.NewMatrix(3, 4), "output must be"},
		{"mttkrp count", pm, []*kernels.Matrix{nil, nil}, nil, "2 factor matrices for an order-3 tensor"},
		{"mttkrp nil", pm, []*kernels.Matrix{kernels.NewMatrix(10, 4), nil, nil}, nil, "factor 3 must be 14 x 4, found nil"},
		{"mttkrp rank", pm, []*kernels.Matrix{kernels.NewMatrix(10, 4), nil, kernels.NewMatrix(14, 5)}, nil, "factor 3 must be 14 x 4"},
		{"mttkrp data", pm, []*kernels.Matrix{{Rows: 10, Cols: 4, Data: make([]float32, 39)}, nil, kernels.NewMatrix(14, 4)}, nil, "factor 1 must be 10 x 4, found 10x4 (39 values)"},
		{"mttkrp out", pm, operandsFor(hetero.MTTKRP, x, 1, 4, 1), kernels.NewMatrix(12, 5), "output must be 12 x 4"},
	} {
		_, err := tc.p.Run(ctx, tc.operands, tc.out)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := pm.Run(ctx, operandsFor(hetero.MTTKRP, x, 1, 4, 1), nil); err != nil {
		t.Errorf("a good run after bad ones: %v", err)
	}
	if _, err := e.PlanMTTKRP(ctx, x, 1, 0); err == nil || !strings.Contains(err.Error(), "rank must be >= 1") {
		t.Errorf("rank 0: err = %v", err)
	}
}

// TestPlanLaterFailure: an accelerator that fails in a later run has that
// run's work redone on the CPU, exactly; the plan keeps it off the device
// from then on (no further attempt, the CPU keeps the binding) and every
// later run reports it failed.
func TestPlanLaterFailure(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	x := randomTensor(rng, []int{50, 40, 30}, 5000)
	ctx := context.Background()
	for _, s := range []hetero.Strategy{hetero.SplitPeak, hetero.SplitAcc, hetero.SplitDynamic} {
		for _, op := range hetero.Ops {
			fake := heterotest.NewAccelerator()
			fake.FailRun = 2 // the first run's is the only one that works under peak and acc
			// Under dynamic the CPU is slowed down, so that the
			// accelerator pulls chunks before the CPU drains the queue.
			var cpu hetero.Device = hetero.NewCPU(0)
			if s == hetero.SplitDynamic {
				cpu = slowDevice{cpu, 5 * time.Millisecond}
			}
			e, err := New([]hetero.Device{cpu, fake}, Options{Split: s, Profile: heterotest.Profile("cpu", "fake:0")})
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("%s split %s", op, s)
			p, err := planFor(ctx, e, op, x, 2, 5)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var runsAtFailure int64
			failedIn := 0
			for k, seed := range []uint64{1, 2, 3, 4} {
				operands := operandsFor(op, x, 2, 5, seed)
				res, err := p.Run(ctx, operands, nil)
				if err != nil {
					t.Fatalf("%s, run %d: %v", what, k+1, err)
				}
				if e := relErr(res.Y.Data, reference(t, op, x, 2, res, operands)); !(e <= 1e-4) {
					t.Errorf("%s, run %d: relative error %.2e", what, k+1, e)
				}
				cpu, acc := res.Devices[0], res.Devices[1]
				if cpu.NNZ+acc.NNZ != int64(x.NNZ()) {
					t.Errorf("%s, run %d: devices computed %d of %d nonzeros", what, k+1, cpu.NNZ+acc.NNZ, x.NNZ())
				}
				if acc.Failed != "" && failedIn == 0 {
					failedIn, runsAtFailure = k+1, fake.Runs()
					if !strings.Contains(acc.Failed, "injected") {
						t.Errorf("%s, run %d: failed = %q", what, k+1, acc.Failed)
					}
				}
				if failedIn == 0 {
					continue
				}
				if acc.Failed == "" || acc.Chunks != 0 && k+1 > failedIn {
					t.Errorf("%s, run %d: the accelerator, failed in run %d, reports %+v", what, k+1, failedIn, acc)
				}
				if !strings.Contains(strings.Join(res.Warnings, "\n"), "fake:0 failed") {
					t.Errorf("%s, run %d: warnings %q do not say the accelerator failed", what, k+1, res.Warnings)
				}
				if k+1 > failedIn && s != hetero.SplitDynamic && cpu.FallbackSeconds <= 0 {
					t.Errorf("%s, run %d: the accelerator's share was not run as the CPU's fallback", what, k+1)
				}
				if k+1 > failedIn+1 && (cpu.ConvertSeconds != 0 || cpu.SetupSeconds != 0) && s != hetero.SplitDynamic {
					t.Errorf("%s, run %d: the CPU converted the accelerator's share again", what, k+1)
				}
			}
			if failedIn == 0 {
				t.Errorf("%s: the injected failure never showed", what)
			}
			if n := fake.Runs(); n != runsAtFailure {
				t.Errorf("%s: the failed accelerator was tried again (%d runs, %d at the failure)", what, n, runsAtFailure)
			}
			if err := p.Close(); err != nil {
				t.Errorf("%s: close: %v", what, err)
			}
		}
	}
}

// TestPlanEmptyRows: output rows no nonzero touches come out zero in a
// reused, dirty output, for every format and for a piece holding the
// whole tensor (cpu, acc: its job writes the output directly) as for a
// split one.
func TestPlanEmptyRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	x := randomTensor(rng, []int{20, 16, 12}, 1200)
	for k := range x.Inds[1] {
		x.Inds[1][k] &^= 1 // odd mode-2 indices stay empty
	}
	x.Sort()
	if _, err := x.Dedup(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, acc := range heterotest.Accelerators(t) {
		for _, op := range hetero.Ops {
			for _, f := range op.Formats() {
				for _, s := range []hetero.Strategy{hetero.SplitCPU, hetero.SplitAcc, hetero.SplitRandom} {
					what := fmt.Sprintf("%s %s split %s on cpu+%s", op, f, s, acc.Info().Name)
					e, err := New([]hetero.Device{hetero.NewCPU(0), acc}, Options{Split: s, Format: f, Profile: heterotest.Profile("cpu", acc.Info().Name), Seed: 1})
					if err != nil {
						t.Fatal(err)
					}
					p, err := planFor(ctx, e, op, x, 1, 3)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					rows, cols := p.OutputShape()
					out := kernels.NewMatrix(rows, cols)
					for _, seed := range []uint64{1, 2} {
						for i := range out.Data {
							out.Data[i] = float32(math.NaN())
						}
						operands := operandsFor(op, x, 1, 3, seed)
						res, err := p.Run(ctx, operands, out)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						if e := relErr(out.Data, reference(t, op, x, 1, res, operands)); !(e <= 1e-4) {
							t.Errorf("%s, seed %d: relative error %.2e", what, seed, e)
						}
					}
					p.Close()
				}
			}
		}
	}
}

// TestPlanMTTKRPAll: the plans of every mode made together run what a
// fresh plan of each mode computes.
func TestPlanMTTKRPAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	x := randomTensor(rng, []int{15, 12, 10, 8}, 900)
	ctx := context.Background()
	e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitPeak, Profile: heterotest.Profile("cpu", "fake:0")})
	if err != nil {
		t.Fatal(err)
	}
	plans, err := e.PlanMTTKRPAll(ctx, x, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != x.Order() {
		t.Fatalf("%d plans for order %d", len(plans), x.Order())
	}
	for m, p := range plans {
		if p.Mode() != m || p.Rank() != 4 || p.Op() != hetero.MTTKRP {
			t.Errorf("plan %d: mode %d rank %d op %s", m, p.Mode(), p.Rank(), p.Op())
		}
		operands := operandsFor(hetero.MTTKRP, x, m, 4, 3)
		res, err := p.Run(ctx, operands, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A fresh plan of the mode alone, not a one-shot MTTKRP: a call
		// that runs once weighs the tensor's upload, so it may split
		// the slices otherwise and sum in another order.
		fresh, err := e.PlanMTTKRP(ctx, x, m, 4)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Run(ctx, operands, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr32(res.Y.Data, want.Y.Data); e != 0 {
			t.Errorf("mode %d: relative error %.2e against a fresh plan", m+1, e)
		}
		if err := fresh.Close(); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
	if _, err := e.PlanMTTKRPAll(ctx, x, 0); err == nil {
		t.Error("rank 0 accepted")
	}
}

// TestPlanMTTKRPAllShares: the plans of every mode on the CPU, in a
// mode-free format (HiCOO, ALTO), convert the tensor once and share the
// copy, and each still computes its mode's MTTKRP; a per-mode format
// (CSF) is not shared.
func TestPlanMTTKRPAllShares(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	x := randomTensor(rng, []int{15, 12, 10, 8}, 900)
	ctx := context.Background()
	for _, format := range formats.TensorFormatNames {
		e, err := New([]hetero.Device{hetero.NewCPU(0)}, Options{Format: format})
		if err != nil {
			t.Fatal(err)
		}
		plans, err := e.PlanMTTKRPAll(ctx, x, 4)
		if err != nil {
			t.Fatal(err)
		}
		in := plans[0].b.(*mttkrpBinder).in
		for m, p := range plans {
			if got := p.b.(*mttkrpBinder).in; got != in {
				t.Errorf("%s: plan %d has an input of its own", format, m+1)
			}
			operands := operandsFor(hetero.MTTKRP, x, m, 4, 5)
			res, err := p.Run(ctx, operands, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := kernels.MTTKRPReference(x, m, operands)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(res.Y.Data, want); e > 1e-5 {
				t.Errorf("%s mode %d: relative error %.2e", format, m+1, e)
			}
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		}
		f1, err := in.conv.Format(format, 0)
		if err != nil {
			t.Fatal(err)
		}
		f2, err := in.conv.Format(format, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := formats.ModeFree(format); (f1 == f2) != want {
			t.Errorf("%s: one shared copy %v, want %v", format, f1 == f2, want)
		}
	}
}

// TestPlanTrafficSplit: a plan keeps its tensor on the accelerator, so
// the peak split charges the link only the operands and the result, and
// gives the accelerator a larger share than a one-shot call, which
// uploads its share of the tensor in its one run.
func TestPlanTrafficSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	x := randomTensor(rng, []int{60, 50, 40}, 20000)
	prof := heterotest.Profile("cpu", "fake:0")
	acc, _ := prof.Device("fake:0")
	acc.LinkGBs = 2 // a slow link: the tensor's bytes cost more than its compute
	prof.Set(acc)
	ctx := context.Background()
	e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitPeak, Profile: prof})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []hetero.Op{hetero.SpTTM, hetero.MTTKRP} {
		var p *Plan
		var once *Result
		operands := operandsFor(op, x, 0, 8, 3)
		if op == hetero.SpTTM {
			p, err = e.PlanTTM(ctx, x, 0, 8)
			if err == nil {
				once, err = e.TTM(ctx, x, 0, operands[0])
			}
		} else {
			p, err = e.PlanMTTKRP(ctx, x, 0, 8)
			if err == nil {
				once, err = e.MTTKRP(ctx, x, 0, operands)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		planShare, onceShare := p.Report().Split.AccShare, once.Split.AccShare
		if !(planShare > onceShare) || onceShare <= 0 {
			t.Errorf("%s: accelerator share %.3f for a plan, %.3f for one call: want the plan's larger", op, planShare, onceShare)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestPlanTTMInPlace: with many small slices the peak split deals SpTTM's
// slices as two ranges, so each side writes its rows of Y in place (no
// gather), and the result is still the reference, run after run into a
// dirtied output.
func TestPlanTTMInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	x := randomTensor(rng, []int{30, 800, 20}, 30000) // mode 1 sliced by mode 2: 800 slices
	ctx := context.Background()
	for _, acc := range heterotest.Accelerators(t) {
		e, err := New([]hetero.Device{hetero.NewCPU(0), acc}, Options{Split: hetero.SplitPeak, Profile: heterotest.Profile("cpu", acc.Info().Name)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.PlanTTM(ctx, x, 0, 5)
		if err != nil {
			t.Fatal(err)
		}
		split := p.Report().Split
		for side, ids := range split.Slices {
			if !oneRange(ids) {
				t.Fatalf("%s: side %d has slices %v..., not one range", acc.Info().Name, side, ids[:min(len(ids), 5)])
			}
		}
		if n := len(p.b.(*ttmBinder).views); n != 2 {
			t.Errorf("%s: %d in-place outputs, want 2 (one per side)", acc.Info().Name, n)
		}
		rows, cols := p.OutputShape()
		out := kernels.NewMatrix(rows, cols)
		for _, seed := range []uint64{1, 2} {
			for i := range out.Data {
				out.Data[i] = float32(math.NaN())
			}
			operands := operandsFor(hetero.SpTTM, x, 0, 5, seed)
			res, err := p.Run(ctx, operands, out)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(out.Data, reference(t, hetero.SpTTM, x, 0, res, operands)); !(e <= 1e-4) {
				t.Errorf("%s, seed %d: relative error %.2e against the reference", acc.Info().Name, seed, e)
			}
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestCountIndices holds the chunked count to a serial one, on both sides
// of the sizes where chunks count apart.
func TestCountIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	for _, tc := range []struct{ n, dim int }{{0, 5}, {1, 1}, {1000, 10}, {1 << 18, 7}, {1 << 18, 1 << 10}, {1 << 18, 1 << 17}, {3<<17 + 5, 1000}} {
		ind := make([]uint32, tc.n)
		want := make([]int, tc.dim)
		for k := range ind {
			ind[k] = uint32(rng.IntN(tc.dim))
			want[ind[k]]++
		}
		if got := countIndices(ind, tc.dim); !slices.Equal(got, want) {
			t.Errorf("%d indices below %d: counts differ from a serial count", tc.n, tc.dim)
		}
	}
}
