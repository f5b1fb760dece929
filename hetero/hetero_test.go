package hetero

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero/opencl"
	"github.com/sparsetune/sparsetune/kernels"
)

// randomTensor returns a tensor with about nnz random nonzeros.
func randomTensor(t *testing.T, rng *rand.Rand, dims []int, nnz int) *formats.COO {
	t.Helper()
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, 2*rng.Float32()-1)
	}
	return x
}

// randomFactors returns a random dims[m] x rank factor matrix per mode.
func randomFactors(rng *rand.Rand, dims []int, rank int) []*kernels.Matrix {
	f := make([]*kernels.Matrix, len(dims))
	for m, d := range dims {
		f[m] = randomMatrix(rng, d, rank)
	}
	return f
}

func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i, w := range want {
		d := float64(got[i]) - w
		num += d * d
		den += w * w
	}
	return math.Sqrt(num / max(den, 1e-300))
}

func TestParseOp(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Op
		err  string
	}{
		{"ttm", SpTTM, ""},
		{"spttm", SpTTM, ""},
		{"mttkrp", MTTKRP, ""},
		{"TTM", 0, `unknown op "TTM"`},
		{"", 0, "unknown op"},
	} {
		got, err := ParseOp(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || got.String() != strings.TrimPrefix(tc.in, "sp") {
			t.Errorf("%q: %v %v", tc.in, got, err)
		}
	}
}

// TestCPUJobsAgree binds every format on the CPU device and checks the
// output it leaves against the references, so that the device passes the
// operands and the output through correctly.
func TestCPUJobsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := randomTensor(t, rng, []int{30, 20, 10}, 2000)
	dev := NewCPU(2)
	const rank = 7
	for mode := range x.Order() {
		factors := randomFactors(rng, x.Dims, rank)
		want, err := kernels.MTTKRPReference(x, mode, factors)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range MTTKRP.Formats() {
			f, err := formats.NewTensorFormat(x, name, mode)
			if err != nil {
				t.Fatal(err)
			}
			out := kernels.NewMatrix(x.Dims[mode], rank)
			job, err := dev.MTTKRP(f, mode, factors, out)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := job.Run(); err != nil {
				t.Fatal(err)
			}
			if e := relErr(out.Data, want); e > 1e-4 {
				t.Errorf("mttkrp %s mode %d: relative error %g", name, mode, e)
			}
			if job.Flops() != MTTKRP.Flops(x.Order(), x.NNZ(), rank) || job.Bytes() <= 0 {
				t.Errorf("mttkrp %s: flops %g bytes %g", name, job.Flops(), job.Bytes())
			}
		}
		fm, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		ut := factors[mode]
		wantY, err := kernels.SpTTMReference(fm, ut)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range SpTTM.Formats() {
			f, err := formats.NewFiberFormat(fm, name)
			if err != nil {
				t.Fatal(err)
			}
			out := kernels.NewMatrix(fm.Rows(), rank)
			job, err := dev.SpTTM(f, ut, out)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := job.Run(); err != nil {
				t.Fatal(err)
			}
			if e := relErr(out.Data, wantY); e > 1e-4 {
				t.Errorf("ttm %s mode %d: relative error %g", name, mode, e)
			}
			if job.Flops() != SpTTM.Flops(x.Order(), x.NNZ(), rank) || job.Bytes() <= 0 {
				t.Errorf("ttm %s: flops %g bytes %g", name, job.Flops(), job.Bytes())
			}
		}
	}
}

func TestMeasure(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := randomTensor(t, rng, []int{40, 30, 20, 10}, 3000)
	dev := NewCPU(0)
	for _, op := range Ops {
		for _, format := range op.Formats() {
			m, err := Measure(dev, x, op, 2, format, 16, 3)
			if err != nil {
				t.Fatalf("%s %s: %v", op, format, err)
			}
			if m.Skipped != "" || m.Seconds <= 0 || m.MinSeconds > m.Seconds || m.GFlops <= 0 || m.GBs <= 0 ||
				m.ConvertSeconds <= 0 || m.Flops != op.Flops(4, 3000, 16) || m.Device != "cpu" || m.Iters != 3 {
				t.Errorf("%s %s: %+v", op, format, m)
			}
		}
	}
}

// TestMeasureRuns: the rule sees the warm-up's time and its answer is the
// number of timed runs, at least one.
func TestMeasureRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := randomTensor(t, rng, []int{30, 20, 10}, 800)
	dev := NewCPU(1)
	for _, tc := range []struct{ answer, want int }{{4, 4}, {1, 1}, {0, 1}, {-3, 1}} {
		var seen time.Duration
		m, err := MeasureRuns(dev, x, MTTKRP, 1, "csf", 8, func(w time.Duration) int { seen = w; return tc.answer })
		if err != nil {
			t.Fatal(err)
		}
		if m.Iters != tc.want || seen <= 0 || m.Seconds <= 0 || m.MinSeconds > m.Seconds {
			t.Errorf("rule answering %d: warm-up %v, %+v", tc.answer, seen, m)
		}
	}
	if _, err := MeasureRuns(dev, x, MTTKRP, 1, "csf", 8, nil); err == nil {
		t.Error("no rule: no error")
	}
}

// runLog is a CPU whose jobs write their number (in binding order) to a
// shared log on every run, and whose closes are counted.
type runLog struct {
	Device
	runs   []int
	jobs   int
	closed int
}

type loggedJob struct {
	Job
	log *runLog
	id  int
}

func (j loggedJob) Run() (Timing, error) { j.log.runs = append(j.log.runs, j.id); return j.Job.Run() }
func (j loggedJob) Close() error         { j.log.closed++; return j.Job.Close() }

func (l *runLog) wrap(job Job, err error) (Job, error) {
	if err != nil {
		return nil, err
	}
	l.jobs++
	return loggedJob{job, l, l.jobs - 1}, nil
}

func (l *runLog) SpTTM(f formats.FiberFormat, ut, out *kernels.Matrix) (Job, error) {
	return l.wrap(l.Device.SpTTM(f, ut, out))
}

func (l *runLog) MTTKRP(x formats.TensorFormat, mode int, factors []*kernels.Matrix, out *kernels.Matrix) (Job, error) {
	return l.wrap(l.Device.MTTKRP(x, mode, factors, out))
}

// TestMeasureFormatsInterleaved: every format is bound, then warmed up,
// then timed one run per format per round; a skipped format gets no job
// and the others are still timed; every job is closed.
func TestMeasureFormatsInterleaved(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	x := randomTensor(t, rng, []int{30, 20, 10}, 900)
	dev := &runLog{Device: NewCPU(1)}
	ms, err := MeasureFormats(dev, x, MTTKRP, 1, MTTKRP.Formats(), 8, func(time.Duration) int { return 3 })
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}
	if !slices.Equal(dev.runs, want) || dev.closed != 4 {
		t.Fatalf("runs in order %v (want %v), %d jobs closed", dev.runs, want, dev.closed)
	}
	for i, m := range ms {
		if m.Format != MTTKRP.Formats()[i] || m.Iters != 3 || m.Seconds <= 0 || m.MinSeconds > m.Seconds || m.ConvertSeconds <= 0 || m.Skipped != "" {
			t.Errorf("%s: %+v", MTTKRP.Formats()[i], m)
		}
	}

	// A padded ELL is skipped; coo, csr and hyb run 2 rounds.
	p, err := formats.NewCOO([]int{1000, 1000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		p.Append([]uint32{uint32(i), 0}, 1)
		p.Append([]uint32{0, uint32(i)}, 1)
	}
	dev = &runLog{Device: NewCPU(1)}
	ms, err = MeasureFormats(dev, p, SpTTM, 1, []string{"coo", "csr", "ell", "hyb"}, 4, func(time.Duration) int { return 2 })
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 0, 1, 2, 0, 1, 2}; !slices.Equal(dev.runs, want) || dev.closed != 3 {
		t.Fatalf("runs in order %v (want %v), %d jobs closed", dev.runs, want, dev.closed)
	}
	if !strings.Contains(ms[2].Skipped, "slots per nonzero") || ms[2].Iters != 0 || ms[0].Iters != 2 || ms[3].Seconds <= 0 {
		t.Fatalf("skipped ell: %+v; others %+v %+v", ms[2], ms[0], ms[3])
	}
}

// TestInfoClass: the class names the hardware, never only the kind.
func TestInfoClass(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{NewCPU(1).Info(), "cpu"},
		{Info{Name: "cpu", Kind: CPU}, "cpu"},
		{Info{Name: "opencl:0", Kind: GPU, Type: "cpu"}, "opencl-cpu"},
		{Info{Name: "opencl:1", Kind: GPU, Type: "gpu"}, "opencl-gpu"},
		{Info{Name: "opencl:2", Kind: GPU, Type: "accelerator"}, "opencl-accelerator"},
		{Info{Name: "cuda:0", Kind: GPU, Type: "gpu"}, "cuda-gpu"},
		{Info{Name: "cuda:3", Kind: GPU}, "cuda-gpu"},
		{Info{Kind: GPU}, "accel-gpu"},
	} {
		if got := tc.info.Class(); got != tc.want {
			t.Errorf("%+v: class %q, want %q", tc.info, got, tc.want)
		}
	}
	for _, tc := range []struct {
		t    opencl.DeviceType
		want string
	}{
		{opencl.TypeCPU, "cpu"},
		{opencl.TypeGPU | opencl.TypeDefault, "gpu"},
		{opencl.TypeAccelerator, "accelerator"},
		{opencl.TypeCustom, "other"},
	} {
		if got := clType(tc.t); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestMeasureSkipsPaddedELL: one long fiber among many short ones makes ELL
// hundreds of slots per nonzero; Measure reports it skipped, not run.
func TestMeasureSkipsPaddedELL(t *testing.T) {
	x, err := formats.NewCOO([]int{1000, 1000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		x.Append([]uint32{uint32(i), 0}, 1)
		x.Append([]uint32{0, uint32(i)}, 1) // row 0 is full
	}
	m, err := Measure(NewCPU(1), x, SpTTM, 1, "ell", 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Skipped, "slots per nonzero") || m.Seconds != 0 {
		t.Fatalf("not skipped: %+v", m)
	}
}

func TestMeasureErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomTensor(t, rng, []int{5, 5, 5}, 20)
	dev := NewCPU(1)
	for _, tc := range []struct {
		op                Op
		mode, rank, iters int
		format, want      string
	}{
		{SpTTM, 3, 4, 1, "csr", "mode 4 out of range"},
		{MTTKRP, 0, 0, 1, "csf", "rank must be at least 1"},
		{MTTKRP, 0, 4, 0, "csf", "iters must be at least 1"},
		{MTTKRP, 0, 4, 1, "bsr", "unknown tensor format"},
		{SpTTM, 0, 4, 1, "bsr", "unknown fiber-matrix format"},
	} {
		if _, err := Measure(dev, x, tc.op, tc.mode, tc.format, tc.rank, tc.iters); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s mode %d: error %v, want %q", tc.op, tc.format, tc.mode, err, tc.want)
		}
	}
}

func TestMemoryBandwidth(t *testing.T) {
	bw, err := MemoryBandwidth(2, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if bw.GBs <= 0 || math.IsInf(bw.GBs, 0) || bw.Threads != 2 || bw.Bytes != 1<<20 {
		t.Fatalf("%+v", bw)
	}
	if _, err := MemoryBandwidth(4, 8, 1); err == nil {
		t.Fatal("accepted 8-byte arrays for 4 threads")
	}
}

func TestLookup(t *testing.T) {
	d, err := Lookup("cpu", 3)
	if err != nil || d.Info().Name != "cpu" || d.Info().Kind != CPU || d.Info().ComputeUnits != 3 {
		t.Fatalf("%v %+v", err, d)
	}
	for _, name := range []string{"gpu", "tpu:0"} {
		if _, err := Lookup(name, 0); err == nil {
			t.Errorf("%s: found", name)
		}
	}
}

// BenchmarkMemoryBandwidth reports the probe's rate as a metric.
func BenchmarkMemoryBandwidth(b *testing.B) {
	for b.Loop() {
		bw, err := MemoryBandwidth(0, 0, 3)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(bw.GBs, "GB/s")
	}
}
