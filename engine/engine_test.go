package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/features"
	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/hetero/heterotest"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/model"
)

// slowDevice is a device whose runs take at least delay longer.
type slowDevice struct {
	hetero.Device
	delay time.Duration
}

func (d slowDevice) SpTTM(f formats.FiberFormat, ut, out *kernels.Matrix) (hetero.Job, error) {
	j, err := d.Device.SpTTM(f, ut, out)
	return slowJob{j, d.delay}, err
}

func (d slowDevice) MTTKRP(x formats.TensorFormat, mode int, factors []*kernels.Matrix, out *kernels.Matrix) (hetero.Job, error) {
	j, err := d.Device.MTTKRP(x, mode, factors, out)
	return slowJob{j, d.delay}, err
}

type slowJob struct {
	hetero.Job
	delay time.Duration
}

func (j slowJob) Run() (hetero.Timing, error) {
	time.Sleep(j.delay)
	return j.Job.Run()
}

func randomTensor(rng *rand.Rand, dims []int, nnz int) *formats.COO {
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		panic(err)
	}
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			// Squared draws skew the indices, so slices differ in size
			// and the largest-first dealing matters.
			u := rng.Float64()
			idx[m] = uint32(float64(d) * u * u)
		}
		x.Append(idx, 2*rng.Float32()-1)
	}
	return x
}

func randomMatrix(rng *rand.Rand, rows, cols int) *kernels.Matrix {
	a := kernels.NewMatrix(rows, cols)
	for i := range a.Data {
		a.Data[i] = 2*rng.Float32() - 1
	}
	return a
}

// relErr is ‖got − want‖ / ‖want‖.
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

// relErr32 is relErr against a float32 result.
func relErr32(got, want []float32) float64 {
	w := make([]float64, len(want))
	for i, v := range want {
		w[i] = float64(v)
	}
	return relErr(got, w)
}

// reference computes op by the definition, for checking results.
func reference(t *testing.T, op hetero.Op, x *formats.COO, mode int, res *Result, operands []*kernels.Matrix) []float64 {
	t.Helper()
	var want []float64
	var err error
	if op == hetero.SpTTM {
		want, err = kernels.SpTTMReference(res.Fibers, operands[0])
	} else {
		want, err = kernels.MTTKRPReference(x, mode, operands)
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// runOp runs op through the engine with the operands of rank R drawn from
// seed, the same for every engine.
func runOp(ctx context.Context, e *Engine, op hetero.Op, x *formats.COO, mode, R int, seed uint64) (*Result, []*kernels.Matrix, error) {
	rng := rand.New(rand.NewPCG(seed, uint64(mode)))
	if op == hetero.SpTTM {
		ut := randomMatrix(rng, x.Dims[mode], R)
		res, err := e.TTM(ctx, x, mode, ut)
		return res, []*kernels.Matrix{ut}, err
	}
	factors := make([]*kernels.Matrix, x.Order())
	for m, d := range x.Dims {
		if m != mode {
			factors[m] = randomMatrix(rng, d, R)
		}
	}
	res, err := e.MTTKRP(ctx, x, mode, factors)
	return res, factors, err
}

// checkAllSplits runs every strategy with every accelerator on every mode
// of x, for both ops, and holds each result to the CPU-only run and to the
// reference.
func checkAllSplits(t *testing.T, name string, x *formats.COO, R int) {
	t.Helper()
	cpuOnly, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	accs := heterotest.Accelerators(t)
	ctx := context.Background()
	for _, op := range hetero.Ops {
		for mode := range x.Order() {
			base, operands, err := runOp(ctx, cpuOnly, op, x, mode, R, 7)
			if err != nil {
				t.Fatalf("%s %s mode %d, cpu only: %v", name, op, mode+1, err)
			}
			want := reference(t, op, x, mode, base, operands)
			if e := relErr(base.Y.Data, want); e > 1e-4 {
				t.Errorf("%s %s mode %d, cpu only: relative error %.2e against the reference", name, op, mode+1, e)
			}
			for _, acc := range accs {
				for _, s := range []hetero.Strategy{hetero.SplitPeak, hetero.SplitDynamic, hetero.SplitRandom, hetero.SplitCPU, hetero.SplitAcc} {
					e, err := New([]hetero.Device{hetero.NewCPU(0), acc}, Options{Split: s, Profile: heterotest.Profile("cpu", acc.Info().Name), Seed: 3})
					if err != nil {
						t.Fatal(err)
					}
					res, _, err := runOp(ctx, e, op, x, mode, R, 7)
					what := fmt.Sprintf("%s %s mode %d on cpu+%s, split %s", name, op, mode+1, acc.Info().Name, s)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					checkResult(t, what, op, res, base, want, s)
				}
			}
		}
	}
}

// checkResult holds a split run to the CPU-only run and the reference, and
// checks its report adds up.
func checkResult(t *testing.T, what string, op hetero.Op, res, base *Result, want []float64, s hetero.Strategy) {
	t.Helper()
	if res.Strategy != s {
		t.Errorf("%s: ran split %s", what, res.Strategy)
	}
	if len(res.Y.Data) != len(base.Y.Data) {
		t.Fatalf("%s: output has %d values, the cpu-only run %d", what, len(res.Y.Data), len(base.Y.Data))
	}
	if e := relErr32(res.Y.Data, base.Y.Data); e > 1e-4 {
		t.Errorf("%s: relative error %.2e against the cpu-only run", what, e)
	}
	if e := relErr(res.Y.Data, want); e > 1e-4 {
		t.Errorf("%s: relative error %.2e against the reference", what, e)
	}
	if len(res.Devices) != 2 {
		t.Fatalf("%s: %d device reports", what, len(res.Devices))
	}
	var nnz int64
	for _, d := range res.Devices {
		nnz += d.NNZ
		if d.Failed != "" {
			t.Errorf("%s: %s failed: %s", what, d.Device, d.Failed)
		}
	}
	if nnz != int64(res.NNZ) {
		t.Errorf("%s: devices computed %d nonzeros of %d", what, nnz, res.NNZ)
	}
	switch s {
	case hetero.SplitCPU:
		if res.Devices[1].NNZ != 0 {
			t.Errorf("%s: the accelerator computed %d nonzeros", what, res.Devices[1].NNZ)
		}
	case hetero.SplitAcc:
		if res.Devices[0].NNZ != 0 {
			t.Errorf("%s: the cpu computed %d nonzeros", what, res.Devices[0].NNZ)
		}
	}
	// A single MTTKRP call runs the CPU's share as it is, with the COO
	// kernel; everything else is predicted.
	for i, d := range res.Devices {
		want := SourcePredicted
		if op == hetero.MTTKRP && i == 0 {
			want = SourceOneRun
		}
		if d.FormatSource != "" && d.FormatSource != want || d.NNZ > 0 && d.FormatSource == "" {
			t.Errorf("%s: %s's format source %q, expected %s", what, d.Device, d.FormatSource, want)
		}
		if d.FormatSource == SourceOneRun && d.Format != "coo" {
			t.Errorf("%s: %s ran %s in place, expected coo", what, d.Device, d.Format)
		}
	}
}

func TestSplitsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dims := range [][]int{{30, 20, 25}, {12, 9, 15, 10}, {7, 6, 8, 5, 6}} {
		x := randomTensor(rng, dims, 1500)
		checkAllSplits(t, fmt.Sprintf("random %v", dims), x, 5)
	}
}

// sharedTensors are the real tensors the split is checked on: small ones
// of ../shared/data, orders 3 and 4.
var sharedTensors = []string{"kg_nations.tns", "kg_umls.tns", "kg_jf17k_4.tns"}

func TestSplitsReal(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "data", "tensors")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no shared tensors in %s: skipping (%v)", dir, err)
	}
	names := sharedTensors
	if testing.Short() {
		names = names[:1]
	}
	for _, name := range names {
		x, err := formats.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		checkAllSplits(t, name, x, 8)
	}
}

// TestForcedFormats forces each format on both devices: every one gives
// the reference, and one the accelerator has no kernel for (HiCOO on
// OpenCL) is redone on the CPU with a warning.
func TestForcedFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomTensor(rng, []int{40, 30, 20}, 3000)
	for _, acc := range heterotest.Accelerators(t) {
		for _, op := range hetero.Ops {
			for _, f := range op.Formats() {
				e, err := New([]hetero.Device{hetero.NewCPU(0), acc}, Options{Format: f, Profile: heterotest.Profile("cpu", acc.Info().Name)})
				if err != nil {
					t.Fatal(err)
				}
				res, operands, err := runOp(context.Background(), e, op, x, 1, 6, 9)
				what := fmt.Sprintf("%s %s forced %s on cpu+%s", op, f, f, acc.Info().Name)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if e := relErr(res.Y.Data, reference(t, op, x, 1, res, operands)); e > 1e-4 {
					t.Errorf("%s: relative error %.2e", what, e)
				}
				if res.FormatSource != SourceForced {
					t.Errorf("%s: format source %q", what, res.FormatSource)
				}
				for _, d := range res.Devices {
					if d.Failed == "" && d.NNZ > 0 && d.Format != f && !(f == "ell" && d.Format == "hyb") {
						t.Errorf("%s: %s ran %s", what, d.Device, d.Format)
					}
					if d.Failed != "" && len(res.Warnings) == 0 {
						t.Errorf("%s: %s failed without a warning", what, d.Device)
					}
				}
			}
		}
	}
}

// TestAcceleratorFailure injects device errors: on the first run (static
// splits), mid-run (dynamic, the third chunk), and at bind. The result is
// exact, the CPU did the work, and a warning says so.
func TestAcceleratorFailure(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := randomTensor(rng, []int{60, 40, 30}, 6000)
	for _, tc := range []struct {
		name     string
		split    hetero.Strategy
		failRun  int64
		failBind bool
	}{
		{"peak, first run", hetero.SplitPeak, 1, false},
		{"acc, first run", hetero.SplitAcc, 1, false},
		{"random, bind", hetero.SplitRandom, 0, true},
		{"dynamic, second chunk", hetero.SplitDynamic, 2, false},
		{"dynamic, bind", hetero.SplitDynamic, 0, true},
	} {
		for _, op := range hetero.Ops {
			fake := heterotest.NewAccelerator()
			fake.FailRun, fake.FailBind = tc.failRun, tc.failBind
			// For dynamic the CPU is slowed down, so that the accelerator
			// pulls chunks before the CPU has drained the queue.
			var cpu hetero.Device = hetero.NewCPU(0)
			if tc.split == hetero.SplitDynamic {
				cpu = slowDevice{cpu, 30 * time.Millisecond}
			}
			e, err := New([]hetero.Device{cpu, fake}, Options{Split: tc.split, Profile: heterotest.Profile("cpu", "fake:0")})
			if err != nil {
				t.Fatal(err)
			}
			res, operands, err := runOp(context.Background(), e, op, x, 0, 4, 1)
			what := fmt.Sprintf("%s %s", op, tc.name)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if e := relErr(res.Y.Data, reference(t, op, x, 0, res, operands)); e > 1e-4 {
				t.Errorf("%s: relative error %.2e", what, e)
			}
			acc := res.Devices[1]
			if acc.Failed == "" || !strings.Contains(acc.Failed, "injected") {
				t.Errorf("%s: accelerator report says failed = %q", what, acc.Failed)
			}
			if got := res.Devices[0].NNZ + acc.NNZ; got != int64(x.NNZ()) {
				t.Errorf("%s: devices computed %d of %d nonzeros", what, got, x.NNZ())
			}
			if tc.failRun > 1 && int64(acc.Chunks) < tc.failRun-1 {
				t.Errorf("%s: the accelerator ran %d chunks before failing", what, acc.Chunks)
			}
			if res.Devices[0].FallbackSeconds <= 0 {
				t.Errorf("%s: no fallback time on the cpu", what)
			}
			found := false
			for _, w := range res.Warnings {
				found = found || (strings.Contains(w, "fake:0 failed") && strings.Contains(w, "redone on cpu"))
			}
			if !found {
				t.Errorf("%s: warnings %q do not report the fallback", what, res.Warnings)
			}
		}
	}
}

// TestCancel: a cancelled context stops the run between chunks with the
// context's error, before or during the run.
func TestCancel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := randomTensor(rng, []int{50, 40, 30}, 5000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runOp(ctx, e, hetero.SpTTM, x, 0, 4, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: err = %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	chunks := 0
	e, err = New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitDynamic, Profile: heterotest.Profile("cpu", "fake:0"),
		Progress: func(done, total int64) {
			chunks++
			cancel()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runOp(ctx, e, hetero.MTTKRP, x, 0, 4, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during: err = %v", err)
	}
	if chunks == 0 || chunks > 2 {
		t.Errorf("cancelled during: %d chunks ran, expected 1 or 2 (one per device)", chunks)
	}
}

// TestCPUOnly: with only a CPU every strategy runs on it, no profile is
// needed, and the report has one device.
func TestCPUOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	x := randomTensor(rng, []int{20, 30, 10}, 800)
	for _, s := range []hetero.Strategy{hetero.SplitPeak, hetero.SplitDynamic, hetero.SplitAcc} {
		e, err := New([]hetero.Device{hetero.NewCPU(0)}, Options{Split: s, Profile: &hetero.Profile{}})
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := runOp(context.Background(), e, hetero.SpTTM, x, 2, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Strategy != hetero.SplitCPU || len(res.Devices) != 1 || res.Devices[0].NNZShare != 1 || res.Imbalance != 0 {
			t.Errorf("split %s: ran %s, %d devices, %+v, imbalance %v", s, res.Strategy, len(res.Devices), res.Devices, res.Imbalance)
		}
	}
}

// TestAcceleratorAlone: an accelerator given without a CPU takes all the
// work, whatever the split, and needs no profile.
func TestAcceleratorAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	x := randomTensor(rng, []int{20, 30, 10}, 800)
	e, err := New([]hetero.Device{heterotest.NewAccelerator()}, Options{Split: hetero.SplitPeak})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := runOp(context.Background(), e, hetero.MTTKRP, x, 0, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Strategy != hetero.SplitAcc || res.Devices[1].NNZShare != 1 || res.Devices[0].NNZ != 0 {
		t.Errorf("ran %s: %+v", res.Strategy, res.Devices)
	}
}

// TestUnsupportedMovesOn: an accelerator without a kernel for the best
// format (HiCOO on OpenCL, from a cached decision) runs the next one, with
// a warning, and does not fall back to the CPU.
func TestUnsupportedMovesOn(t *testing.T) {
	var acc hetero.Device
	for _, d := range heterotest.Accelerators(t) {
		if strings.HasPrefix(d.Info().Name, "opencl:") {
			acc = d
		}
	}
	if acc == nil {
		t.Skip("no OpenCL device")
	}
	rng := rand.New(rand.NewPCG(8, 9))
	x := randomTensor(rng, []int{20, 30, 10}, 800)
	dec := &model.Decisions{Dir: t.TempDir()}
	id := tensorID(t, x)
	d := &model.Decision{Key: id.Key, Fingerprint: id.Fingerprint(), Op: "mttkrp", Mode: 1, Device: acc.Info().Name, Predictor: "measure",
		Prediction: &model.Prediction{Formats: []model.Ranked{{Format: "hicoo", Score: 1}, {Format: "alto", Score: 0.9}}}}
	if err := dec.Put(d, hetero.MTTKRP, 0); err != nil {
		t.Fatal(err)
	}
	e, err := New([]hetero.Device{hetero.NewCPU(0), acc}, Options{Split: hetero.SplitAcc, Decisions: dec})
	if err != nil {
		t.Fatal(err)
	}
	res, operands, err := runOp(context.Background(), e, hetero.MTTKRP, x, 0, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(res.Y.Data, reference(t, hetero.MTTKRP, x, 0, res, operands)); e > 1e-4 {
		t.Errorf("relative error %.2e", e)
	}
	r := res.Devices[1]
	if r.Format != "alto" || r.FormatSource != SourceCached || r.Failed != "" || r.NNZShare != 1 {
		t.Errorf("accelerator report %+v", r)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "cannot run hicoo") {
		t.Errorf("warnings %q", res.Warnings)
	}
	// The CPU, dealt nothing, decided nothing (TestUndealtSideDecidesLate).
	if c := res.Devices[0]; c.Format != "" || c.FormatSource != "" {
		t.Errorf("cpu report %+v", c)
	}
	if res.FormatSource != SourceCached {
		t.Errorf("format source %q", res.FormatSource)
	}
}

// summaryRecorder is the rule through a summary (it never answers
// without one), keeping the summaries it was given and a count of the
// predictions per device kind.
type summaryRecorder struct {
	mu        sync.Mutex
	summaries []*features.Summary
	kinds     map[hetero.Kind]int
}

func (r *summaryRecorder) Predict(x *formats.COO, op hetero.Op, mode int, kind hetero.Kind) (*model.Prediction, error) {
	return model.RulePredictor{}.Predict(x, op, mode, kind)
}

func (r *summaryRecorder) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*model.Prediction, error) {
	r.mu.Lock()
	r.summaries = append(r.summaries, s)
	if r.kinds == nil {
		r.kinds = map[hetero.Kind]int{}
	}
	r.kinds[kind]++
	r.mu.Unlock()
	return model.RulePredictor{}.PredictSummary(s, op, mode, kind)
}

// TestUndealtSideDecidesLate: a device the split deals nothing (the CPU
// under SplitAcc) is not predicted for when the plan is built, reports
// no format, and decides its format when it must take over the
// accelerator's work: the result is still exact.
func TestUndealtSideDecidesLate(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	x := randomTensor(rng, []int{40, 30, 20}, 3000)
	for _, failRun := range []int64{0, 1} {
		pred := &summaryRecorder{}
		fake := heterotest.NewAccelerator()
		fake.FailRun = failRun
		e, err := New([]hetero.Device{hetero.NewCPU(0), fake}, Options{Split: hetero.SplitAcc, Predictor: pred})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.PlanMTTKRP(context.Background(), x, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Formats(); got[0] != "" || got[1] == "" || pred.kinds[hetero.CPU] != 0 || pred.kinds[hetero.GPU] != 1 {
			t.Errorf("fail at run %d: planned formats %q after predictions %v; want the accelerator's alone", failRun, got, pred.kinds)
		}
		if r := p.Report(); r.Devices[0].Format != "" || r.Devices[0].FormatSource != "" || r.FormatSource != SourcePredicted {
			t.Errorf("fail at run %d: plan report %+v, source %q", failRun, r.Devices, r.FormatSource)
		}
		operands := make([]*kernels.Matrix, x.Order())
		for m, d := range x.Dims[1:] {
			operands[m+1] = randomMatrix(rng, d, 4)
		}
		res, err := p.Run(context.Background(), operands, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(res.Y.Data, reference(t, hetero.MTTKRP, x, 0, res, operands)); e > 1e-4 {
			t.Errorf("fail at run %d: relative error %.2e", failRun, e)
		}
		took := failRun > 0
		if n := pred.kinds[hetero.CPU]; n != map[bool]int{false: 0, true: 1}[took] {
			t.Errorf("fail at run %d: %d predictions for the cpu", failRun, n)
		}
		if c := res.Devices[0]; took != (c.Format != "" && c.FormatSource == SourcePredicted && c.NNZ == int64(x.NNZ())) {
			t.Errorf("fail at run %d: cpu report %+v", failRun, c)
		}
		p.Close()
	}
	// Under dynamic either device may pull any chunk: both choose up
	// front.
	pred := &summaryRecorder{}
	e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitDynamic, Profile: heterotest.Profile("cpu", "fake:0"), Predictor: pred})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.PlanMTTKRP(context.Background(), x, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Formats(); got[0] == "" || got[1] == "" || pred.kinds[hetero.CPU] != 1 || pred.kinds[hetero.GPU] != 1 {
		t.Errorf("dynamic: planned formats %q after predictions %v; want both", got, pred.kinds)
	}
}

// TestCachedDecision: a measured decision in the cache wins over the
// predictor and is reported as cached.
func TestCachedDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	x := randomTensor(rng, []int{20, 30, 10}, 800)
	dec := &model.Decisions{Dir: t.TempDir()}
	id := tensorID(t, x)
	d := &model.Decision{Key: id.Key, Fingerprint: id.Fingerprint(), Op: "mttkrp", Mode: 2, Device: "cpu", Predictor: "measure",
		Prediction: &model.Prediction{Formats: []model.Ranked{{Format: "hicoo", Score: 1}, {Format: "coo", Score: 0.5}}}}
	if err := dec.Put(d, hetero.MTTKRP, 1); err != nil {
		t.Fatal(err)
	}
	e, err := New(nil, Options{Decisions: dec})
	if err != nil {
		t.Fatal(err)
	}
	// A plan, which runs many times, takes the cached decision; a single
	// call (Engine.MTTKRP) runs the tensor as it is on the CPU whatever
	// the cache says.
	for _, tc := range []struct {
		mode           int
		format, source string
	}{
		{1, "hicoo", SourceCached},
		{0, "", SourcePredicted},
	} {
		p, err := e.PlanMTTKRP(context.Background(), x, tc.mode, 3)
		if err != nil {
			t.Fatal(err)
		}
		r := p.Report().Devices[0]
		p.Close()
		if r.FormatSource != tc.source || tc.format != "" && r.Format != tc.format {
			t.Errorf("mode %d: planned %s (%s), expected %q (%s)", tc.mode+1, r.Format, r.FormatSource, tc.format, tc.source)
		}
	}
	res, _, err := runOp(context.Background(), e, hetero.MTTKRP, x, 1, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Devices[0]; r.Format != "coo" || r.FormatSource != SourceOneRun {
		t.Errorf("mode 2, one call: ran %s (%s), expected coo (%s)", r.Format, r.FormatSource, SourceOneRun)
	}
}

func TestBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randomTensor(rng, []int{5, 6, 7}, 50)
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"mode", func() error { _, err := e.TTM(ctx, x, 3, kernels.NewMatrix(5, 2)); return err }, "mode 4 out of range"},
		{"mode largest int", func() error { _, err := e.PlanMTTKRP(ctx, x, math.MaxInt, 2); return err }, "mode " + strconv.FormatUint(uint64(math.MaxInt)+1, 10) + " out of range"},
		{"factor", func() error { _, err := e.TTM(ctx, x, 0, kernels.NewMatrix(6, 2)); return err }, "factor must be"},
		{"factors", func() error { _, err := e.MTTKRP(ctx, x, 0, []*kernels.Matrix{nil, nil}); return err }, "2 factor matrices"},
		{"rank", func() error {
			_, err := e.MTTKRP(ctx, x, 0, []*kernels.Matrix{nil, kernels.NewMatrix(6, 2), kernels.NewMatrix(7, 3)})
			return err
		}, "factor 3 must be"},
		{"format", func() error {
			e, err := New(nil, Options{Format: "csf"})
			if err != nil {
				return err
			}
			_, err = e.TTM(ctx, x, 0, kernels.NewMatrix(5, 2))
			return err
		}, "format csf does not run ttm"},
	} {
		if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(nil, Options{Format: "dia"}); err == nil {
		t.Error("format dia accepted")
	}
	if _, err := New([]hetero.Device{heterotest.NewAccelerator(), heterotest.NewAccelerator()}, Options{}); err == nil {
		t.Error("two accelerators accepted")
	}
	// A profile without the accelerator is an error naming it.
	e, err = New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Profile: heterotest.Profile("cpu")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TTM(ctx, x, 0, kernels.NewMatrix(5, 2)); err == nil || !strings.Contains(err.Error(), "no profile for device fake:0") {
		t.Errorf("missing profile: err = %v", err)
	}
}

// TestSemiSparse: the semi-sparse tensor has the rank in place of the
// mode, and one entry per fiber and rank index with Y's value.
func TestSemiSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	x := randomTensor(rng, []int{6, 7, 8}, 60)
	e, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := runOp(context.Background(), e, hetero.SpTTM, x, 1, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	y, err := res.SemiSparse()
	if err != nil {
		t.Fatal(err)
	}
	if y.Dims[1] != 3 || y.Dims[0] != 6 || y.Dims[2] != 8 || y.NNZ() != res.Fibers.Rows()*3 {
		t.Fatalf("semi-sparse dims %v nnz %d, fibers %d", y.Dims, y.NNZ(), res.Fibers.Rows())
	}
	if err := y.Validate(); err != nil {
		t.Fatal(err)
	}
	for k := range y.NNZ() {
		row, r := k/3, int(y.Inds[1][k])
		if y.Vals[k] != res.Y.At(row, r) {
			t.Fatalf("entry %d: %v, Y(%d,%d) = %v", k, y.Vals[k], row, r, res.Y.At(row, r))
		}
	}
	mres, _, err := runOp(context.Background(), e, hetero.MTTKRP, x, 1, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mres.SemiSparse(); err == nil {
		t.Error("an MTTKRP result gave a semi-sparse tensor")
	}
}

// TestResultVerify: a result of either op, computed with the fake
// accelerator beside the CPU, verifies near 0 and within the tolerance
// of the tests' own reference; one with a lost row far above; a result
// it cannot check is an error.
func TestResultVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := randomTensor(rng, []int{30, 20, 25}, 2000)
	e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitPeak, Profile: heterotest.Profile("cpu", "fake:0")})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range hetero.Ops {
		res, operands, err := runOp(context.Background(), e, op, x, 1, 4, 2)
		if err != nil {
			t.Fatal(err)
		}
		got, err := res.Verify(x, operands)
		if want := relErr(res.Y.Data, reference(t, op, x, 1, res, operands)); err != nil || got > 1e-4 || math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: Verify %g, %v; the reference gives %g", op, got, err, want)
		}
		// The row with the most weight lost, as a dropped slice would be.
		busiest, most := 0, 0.0
		for i := range res.Y.Rows {
			var s float64
			for _, v := range res.Y.Row(i) {
				s += float64(v) * float64(v)
			}
			if s > most {
				busiest, most = i, s
			}
		}
		clear(res.Y.Row(busiest))
		if got, err := res.Verify(x, operands); err != nil || got < 0.01 {
			t.Errorf("%s with a row lost: Verify %g, %v", op, got, err)
		}
		if op == hetero.SpTTM {
			if _, err := res.Verify(x, nil); err == nil {
				t.Error("SpTTM verified without its operand")
			}
		}
	}
	if _, err := (&Result{Op: hetero.MTTKRP}).Verify(x, nil); err == nil {
		t.Error("a result without output verified")
	}
}

// TestNoHeadMeasures: a GCN trained only for the CPU's class answers for
// the CPU, and the accelerator, whose class has no head, gets every
// format measured on it (and cached), never the CPU head's guess.
func TestNoHeadMeasures(t *testing.T) {
	g, err := model.NewGCN(model.DefaultConfig("ttm", model.Head{Name: "cpu", Classes: hetero.SpTTM.Formats()}), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	m := parsedModel(t, g, "cpu-only.onnx")
	rng := rand.New(rand.NewPCG(8, 9))
	x := randomTensor(rng, []int{20, 30, 10}, 800)
	dec := &model.Decisions{Dir: t.TempDir()}
	e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitRandom, Profile: heterotest.Profile("cpu", "fake:0"), Predictor: model.GCNPredictor{Model: m}, Decisions: dec})
	if err != nil {
		t.Fatal(err)
	}
	for run, want := range []string{SourceMeasured, SourceCached} {
		res, operands, err := runOp(context.Background(), e, hetero.SpTTM, x, 1, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(res.Y.Data, reference(t, hetero.SpTTM, x, 1, res, operands)); e > 1e-4 {
			t.Errorf("run %d: relative error %.2e", run+1, e)
		}
		if cpu, acc := res.Devices[0], res.Devices[1]; cpu.FormatSource != SourcePredicted || acc.FormatSource != want {
			t.Errorf("run %d: format sources cpu %s, accelerator %s; want predicted, %s", run+1, cpu.FormatSource, acc.FormatSource, want)
		}
		noted := strings.Contains(strings.Join(res.Warnings, "\n"), "no head for device class")
		if noted != (want == SourceMeasured) {
			t.Errorf("run %d: warnings %q", run+1, res.Warnings)
		}
	}
}

// parsedModel exports g and reads the file back as the model file name.
func parsedModel(t *testing.T, g *model.GCN, name string) *model.ONNXModel {
	t.Helper()
	data, err := g.ExportONNX()
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.ParseONNX(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRankNote: a decision at a rank far from the ranks the answering
// head learnt from carries a note saying so; one near them does not, nor
// one the rule made.
func TestRankNote(t *testing.T) {
	g, err := model.NewGCN(model.DefaultConfig("mttkrp", model.Head{Name: "cpu", Classes: hetero.MTTKRP.Formats()}), rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	g.LabelRanks = map[string][]int{"cpu": {16}}
	m := parsedModel(t, g, "rank16.onnx")
	// The same with a head learnt at rank 64 beside it, which answers
	// at 64 (model.Info.HeadAtRank), with nothing to note.
	classes := hetero.MTTKRP.Formats()
	g, err = model.NewGCN(model.DefaultConfig("mttkrp", model.Head{Name: "cpu", Classes: classes}, model.Head{Name: model.RankHead("cpu", 64), Classes: classes}), rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	g.LabelRanks = map[string][]int{"cpu": {16}, "cpu@r64": {64}}
	ranked := parsedModel(t, g, "ranked.onnx")
	x := randomTensor(rand.New(rand.NewPCG(8, 9)), []int{20, 30, 10}, 800)
	for _, c := range []struct {
		pred model.SummaryPredictor
		rank int
		want bool
	}{
		{model.GCNPredictor{Model: m}, 16, false},
		{model.GCNPredictor{Model: m}, 12, false},
		{model.GCNPredictor{Model: m}, 64, true},
		{model.GCNPredictor{Model: m}, 4, true},
		{model.RulePredictor{}, 64, false},
		{model.GCNPredictor{Model: ranked}, 64, false},
		{model.GCNPredictor{Model: ranked}, 4, true},
	} {
		e, err := New([]hetero.Device{hetero.NewCPU(0)}, Options{Predictor: c.pred})
		if err != nil {
			t.Fatal(err)
		}
		// A plan, not a one-shot run, which runs COO in place unasked.
		p, err := e.PlanMTTKRP(context.Background(), x, 0, c.rank)
		if err != nil {
			t.Fatal(err)
		}
		ws := p.Report().Warnings
		p.Close()
		noted := strings.Contains(strings.Join(ws, "\n"), fmt.Sprintf("learnt from times at rank 16, not %d", c.rank))
		if noted != c.want {
			t.Errorf("%T at rank %d: warnings %q, want the rank note: %v", c.pred, c.rank, ws, c.want)
		}
	}
}

// summaryCounter is the rule with a count of the predictions that needed
// a tensor summary.
type summaryCounter struct {
	model.RulePredictor
	summaries int
}

func (c *summaryCounter) PredictSummary(s *features.Summary, op hetero.Op, mode int, kind hetero.Kind) (*model.Prediction, error) {
	c.summaries++
	return c.RulePredictor.PredictSummary(s, op, mode, kind)
}

// TestSummaryFreePrediction: a predictor that answers without a summary
// (the rule, a model head deferring to it) is asked first, and the
// tensor is never summarised.
func TestSummaryFreePrediction(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	x := randomTensor(rng, []int{20, 15, 10}, 800)
	pred := &summaryCounter{}
	e, err := New([]hetero.Device{hetero.NewCPU(0), heterotest.NewAccelerator()}, Options{Split: hetero.SplitRandom, Profile: heterotest.Profile("cpu", "fake:0"), Predictor: pred})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.PlanMTTKRP(context.Background(), x, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := []string{model.RuleChoice(hetero.MTTKRP, hetero.CPU), model.RuleChoice(hetero.MTTKRP, hetero.GPU)}
	if got := p.Formats(); !slices.Equal(got, want) || pred.summaries != 0 {
		t.Errorf("formats %v (want %v), %d predictions through a summary (want 0)", got, want, pred.summaries)
	}
}

// tensorID is x's name in the decision cache, as the engine makes it.
func tensorID(t *testing.T, x *formats.COO) *model.TensorID {
	t.Helper()
	s, err := features.Summarize(x)
	if err != nil {
		t.Fatal(err)
	}
	return model.NewTensorID(x, s)
}

// TestUsePicks: the format choice summarises a tensor from the picks its
// reader made (the same summary as from the tensor), counts their time in
// PredictSeconds, and ignores picks made for another tensor.
func TestUsePicks(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	x := randomTensor(rng, []int{3000, 2000, 40}, 150_000)
	x.SumDuplicates() // a file with duplicates is read summed, and picked from nowhere
	if features.SampleNNZ(x.NNZ()) >= x.NNZ() {
		t.Fatal("the tensor is summarised whole: no picks to test")
	}
	path := filepath.Join(t.TempDir(), "x.stb")
	if err := formats.WriteFile(path, x); err != nil {
		t.Fatal(err)
	}
	read, picks, _, err := formats.ReadFilePicked(path, features.PickPositions)
	if err != nil || picks == nil {
		t.Fatalf("picks %v, %v", picks, err)
	}
	want, err := features.Summarize(read)
	if err != nil {
		t.Fatal(err)
	}
	sameSample := func(s *features.Summary) bool {
		for m := range s.Sample.Inds {
			if !slices.Equal(s.Sample.Inds[m], want.Sample.Inds[m]) {
				return false
			}
		}
		return true
	}
	plan := func(y *formats.COO, p *formats.Picks) (*summaryRecorder, PlanReport) {
		t.Helper()
		rec := &summaryRecorder{}
		e, err := New(nil, Options{Predictor: rec})
		if err != nil {
			t.Fatal(err)
		}
		e.UsePicks(y, p)
		pl, err := e.PlanMTTKRP(context.Background(), read, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer pl.Close()
		if len(rec.summaries) != 1 {
			t.Fatalf("%d summaries", len(rec.summaries))
		}
		return rec, pl.Report()
	}
	rec, _ := plan(read, picks)
	if !sameSample(rec.summaries[0]) {
		t.Error("the summary from the picks differs from Summarize's")
	}
	// Picks that name other nonzeros change the sample: they are used.
	// Their time counts in the prediction's.
	other := *picks
	other.Inds = [][]uint32{slices.Clone(picks.Inds[0]), picks.Inds[1], picks.Inds[2]}
	other.Inds[0][0] = (other.Inds[0][0] + 1) % uint32(read.Dims[0])
	other.Took = time.Hour
	rec, rep := plan(read, &other)
	if sameSample(rec.summaries[0]) || rep.PredictSeconds < time.Hour.Seconds() {
		t.Errorf("other picks: same sample %v, predict_seconds %v", sameSample(rec.summaries[0]), rep.PredictSeconds)
	}
	// Picks of another tensor are not used.
	rec, rep = plan(x, &other)
	if !sameSample(rec.summaries[0]) || rep.PredictSeconds >= time.Hour.Seconds() {
		t.Errorf("another tensor's picks: same sample %v, predict_seconds %v", sameSample(rec.summaries[0]), rep.PredictSeconds)
	}
}

// TestOneRunInPlace: a single MTTKRP call runs the CPU's COO kernel on the
// tensor as it is, unless its private output copies would take more
// memory than a converted copy of the tensor; forced formats and plans
// are left alone.
func TestOneRunInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const R = 8
	for _, tc := range []struct {
		name   string
		dims   []int
		nnz    int
		mode   int
		opts   Options
		format string
		source string
	}{
		{"unsorted", []int{300, 200, 100}, 40000, 1, Options{}, "coo", SourceOneRun},
		// Two parts: one private copy of 200,000 rows of 8 floats (6.4
		// MB) against 20,000 nonzeros of 16 bytes.
		{"output too tall", []int{200000, 5, 5}, 20000, 0, Options{}, "", SourcePredicted},
		{"forced", []int{300, 200, 100}, 40000, 1, Options{Format: "csf"}, "csf", SourceForced},
	} {
		x := randomTensor(rng, tc.dims, tc.nnz)
		e, err := New([]hetero.Device{hetero.NewCPU(2)}, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		res, factors, err := runOp(context.Background(), e, hetero.MTTKRP, x, tc.mode, R, 5)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d := res.Devices[0]
		if d.FormatSource != tc.source || tc.format != "" && d.Format != tc.format {
			t.Errorf("%s: ran %s (%s), expected %q (%s)", tc.name, d.Format, d.FormatSource, tc.format, tc.source)
		}
		if e := relErr(res.Y.Data, reference(t, hetero.MTTKRP, x, tc.mode, res, factors)); e > 1e-4 {
			t.Errorf("%s: relative error %.2e against the reference", tc.name, e)
		}
		if tc.source == SourceOneRun && res.PredictSeconds != 0 {
			t.Errorf("%s: in place, yet predicted for %gs", tc.name, res.PredictSeconds)
		}
	}
}

// silentPredictor answers nothing and says nothing: a caller's bug.
type silentPredictor struct{}

func (silentPredictor) Predict(*formats.COO, hetero.Op, int, hetero.Kind) (*model.Prediction, error) {
	return nil, nil
}

func (silentPredictor) PredictSummary(*features.Summary, hetero.Op, int, hetero.Kind) (*model.Prediction, error) {
	return nil, nil
}

// TestSilentPredictor: a predictor that gives neither a prediction nor
// an error fails the run with an error saying so, not a panic.
func TestSilentPredictor(t *testing.T) {
	x := randomTensor(rand.New(rand.NewPCG(1, 1)), []int{5, 6, 7}, 50)
	e, err := New(nil, Options{Predictor: silentPredictor{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PlanMTTKRP(context.Background(), x, 0, 2); err == nil || !strings.Contains(err.Error(), "no prediction and no error") {
		t.Errorf("PlanMTTKRP: %v", err)
	}
}

// TestDistinctErrors: both sides stopped by one context give its error
// once; different errors are all kept, in order.
func TestDistinctErrors(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	for _, c := range []struct {
		in   []error
		want string
	}{
		{[]error{context.DeadlineExceeded, context.DeadlineExceeded}, "context deadline exceeded"},
		{[]error{nil, context.Canceled}, "context canceled"},
		{[]error{a, b, errors.New("a")}, "a\nb"},
		{[]error{nil, nil}, ""},
	} {
		got := ""
		if err := errors.Join(distinct(c.in)...); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%v: %q, want %q", c.in, got, c.want)
		}
	}
	var r Result
	r.Y = kernels.NewMatrix(1, 1)
	if _, err := r.Verify(nil, nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("Verify of a nil tensor: %v", err)
	}
}
