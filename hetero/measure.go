package hetero

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

var errNilMatrix = errors.New("matrix is nil")

// Measurement is the timing of one operation, mode and format on one
// device. Times are seconds; the kernel time is the median over the runs.
type Measurement struct {
	Op             Op
	Mode           int // 0-based
	Format         string
	Device         string
	Rank           int
	Iters          int
	Seconds        float64 // median kernel time
	MinSeconds     float64 // fastest kernel time
	HostToDevice   float64 // median transfer times (0 on the CPU)
	DeviceToHost   float64
	ConvertSeconds float64 // COO to the format, on the host
	// FormatBytes is the memory of the format's arrays (for SpTTM with the
	// fiber coordinates every format shares); WorkspaceBytes what the
	// kernel plan holds beside it (private output copies), where the device
	// can tell. Their sum and the dense matrices are the run's peak memory.
	FormatBytes    int64
	WorkspaceBytes int64
	Flops          float64
	Bytes          float64
	GFlops         float64 // Flops / Seconds / 1e9
	GBs            float64 // Bytes / Seconds / 1e9
	// Skipped, when not empty, says why the format was not run (the times
	// are then zero).
	Skipped string
}

// Measure converts x to the format for op and mode, binds it on d with
// random operands of the given rank, runs it once to warm up and then iters
// times, and reports the median. The conversion time includes building the
// fiber matrix for SpTTM (sliced by formats.DefaultSliceMode) and sorting
// for COO: it is what a user pays to run in that format. An ELL too padded
// to build (formats.MaxELLSlotsPerNNZ), or a format the device cannot run
// (IsUnsupported), is reported as skipped, not run.
func Measure(d Device, x *formats.COO, op Op, mode int, format string, rank, iters int) (*Measurement, error) {
	if iters < 1 {
		return nil, fmt.Errorf("iters must be at least 1, found %d", iters)
	}
	return MeasureRuns(d, x, op, mode, format, rank, func(time.Duration) int { return iters })
}

// MeasureRuns is Measure with the number of timed runs chosen after the
// warm-up run: runs is given the warm-up's time (all phases) and returns
// how many runs to time (at least 1 is run), so that long kernels can be
// timed fewer times than short ones. Measurement.Iters records the number.
func MeasureRuns(d Device, x *formats.COO, op Op, mode int, format string, rank int, runs func(warmup time.Duration) int) (*Measurement, error) {
	ms, err := MeasureFormats(d, x, op, mode, []string{format}, rank, runs)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// MeasureFormats measures every format in formatNames as MeasureRuns does, one
// Measurement each, but interleaved: every format is converted and bound
// first, then each is warmed up, then the timed runs go round by round, one
// run of each format per round, until each has had the runs its warm-up
// asked for. A machine whose speed drifts over seconds (a shared VM, a
// GPU changing clocks) then slows every format alike instead of whichever
// was measured at the time, so which format is fastest is repeatable.
// The formats' arrays are all held at once while they are timed.
func MeasureFormats(d Device, x *formats.COO, op Op, mode int, formatNames []string, rank int, runs func(warmup time.Duration) int) ([]*Measurement, error) {
	if err := formats.CheckMode(mode, x.Order()); err != nil {
		return nil, err
	}
	if rank < 1 {
		return nil, fmt.Errorf("rank must be at least 1, found %d", rank)
	}
	if runs == nil {
		return nil, errors.New("no rule for the number of runs")
	}
	// Every format is bound, with operands of its own, before any is timed.
	var shapes [][2]int
	for range formatNames {
		shapes = append(shapes, DenseShapes(op, x.Dims, mode, rank)...)
	}
	if err := kernels.CheckDenseFits(x, "the random operands", shapes...); err != nil {
		return nil, err
	}
	ms := make([]*Measurement, len(formatNames))
	jobs := make([]Job, len(formatNames))
	defer func() {
		for _, job := range jobs {
			if job != nil {
				job.Close()
			}
		}
	}()
	for i, format := range formatNames {
		m, job, err := bind(d, x, op, mode, format, rank)
		if err != nil {
			return nil, err
		}
		ms[i], jobs[i] = m, job
	}
	// Collect the conversions' garbage now: a collection running beside the
	// timed runs takes a core from them (measured: an ALTO MTTKRP 25%
	// slower inside a full bench than alone).
	runtime.GC()
	type timing struct{ kernel, h2d, d2h []float64 }
	times := make([]timing, len(jobs))
	rounds := 0
	for i, job := range jobs {
		if job == nil {
			continue
		}
		if w, ok := job.(interface{ WorkspaceBytes() int64 }); ok {
			ms[i].WorkspaceBytes = w.WorkspaceBytes()
		}
		warm, err := job.Run()
		if err != nil {
			return nil, err
		}
		ms[i].Iters = max(runs(warm.Total()), 1)
		rounds = max(rounds, ms[i].Iters)
	}
	for r := range rounds {
		for i, job := range jobs {
			if job == nil || r >= ms[i].Iters {
				continue
			}
			t, err := job.Run()
			if err != nil {
				return nil, err
			}
			tm := &times[i]
			tm.kernel = append(tm.kernel, t.Kernel.Seconds())
			tm.h2d = append(tm.h2d, t.HostToDevice.Seconds())
			tm.d2h = append(tm.d2h, t.DeviceToHost.Seconds())
		}
	}
	for i, job := range jobs {
		if job == nil {
			continue
		}
		m, tm := ms[i], times[i]
		m.MinSeconds = slices.Min(tm.kernel)
		m.Seconds, m.HostToDevice, m.DeviceToHost = median(tm.kernel), median(tm.h2d), median(tm.d2h)
		m.Flops, m.Bytes = job.Flops(), job.Bytes()
		if m.Seconds > 0 {
			m.GFlops = m.Flops / m.Seconds / 1e9
			m.GBs = m.Bytes / m.Seconds / 1e9
		}
	}
	return ms, nil
}

// formatChecker is a Device that runs only some formats and can say which
// from a format's name, before a tensor is converted to it.
type formatChecker interface {
	CheckFormat(op Op, format string) error
}

// bind converts x to format for op and mode and binds it on d with random
// operands of the given rank. It returns a nil job, and the reason in
// Measurement.Skipped, for a format that is not run.
func bind(d Device, x *formats.COO, op Op, mode int, format string, rank int) (*Measurement, Job, error) {
	m := &Measurement{Op: op, Mode: mode, Format: format, Device: d.Info().Name, Rank: rank}
	if c, ok := d.(formatChecker); ok {
		if err := c.CheckFormat(op, format); IsUnsupported(err) {
			m.Skipped = err.Error()
			return m, nil, nil
		}
	}
	rng := rand.New(rand.NewPCG(uint64(mode), uint64(rank)))
	switch op {
	case SpTTM:
		start := time.Now()
		fm, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
		if err != nil {
			return nil, nil, err
		}
		if format == "ell" {
			if slots := int64(fm.Rows()) * int64(fm.MaxRowLen()); slots > formats.MaxELLSlotsPerNNZ*int64(max(fm.NNZ(), 1)) {
				m.Skipped = fmt.Sprintf("ell would hold %.0f slots per nonzero (limit %d)", float64(slots)/float64(fm.NNZ()), formats.MaxELLSlotsPerNNZ)
				return m, nil, nil
			}
		}
		f, err := formats.NewFiberFormat(fm, format)
		if err != nil {
			return nil, nil, err
		}
		m.ConvertSeconds = time.Since(start).Seconds()
		m.FormatBytes = f.Bytes() + fm.FiberBytes()
		ut := randomMatrix(rng, x.Dims[mode], rank)
		out := kernels.NewMatrix(fm.Rows(), rank)
		job, err := d.SpTTM(f, ut, out)
		if IsUnsupported(err) {
			m.Skipped = err.Error()
			return m, nil, nil
		}
		return m, job, err
	case MTTKRP:
		start := time.Now()
		f, err := formats.NewTensorFormat(x, format, mode)
		if err != nil {
			return nil, nil, err
		}
		m.ConvertSeconds = time.Since(start).Seconds()
		m.FormatBytes = f.Bytes()
		factors := make([]*kernels.Matrix, x.Order())
		for k, dim := range x.Dims {
			if k != mode {
				factors[k] = randomMatrix(rng, dim, rank)
			}
		}
		out := kernels.NewMatrix(x.Dims[mode], rank)
		job, err := d.MTTKRP(f, mode, factors, out)
		if IsUnsupported(err) {
			m.Skipped = err.Error()
			return m, nil, nil
		}
		return m, job, err
	default:
		return nil, nil, fmt.Errorf("unknown op %v", op)
	}
}

// DenseShapes returns the {rows, cols} of the dense matrices of op along
// mode at rank R whose size follows the dims, not the nonzeros: the
// operand (SpTTM) or the output (MTTKRP), Dims[mode] x R, MTTKRP's
// factors of the other modes, and the padded copies of them a CPU
// MTTKRP plan holds at some ranks (kernels.MTTKRPPadShapes). SpTTM's
// output, fibers x R, is at most nonzeros x R.
// Callers that make them check them first (kernels.CheckDenseFits).
func DenseShapes(op Op, dims []int, mode, rank int) [][2]int {
	shapes := [][2]int{{dims[mode], rank}}
	if op == MTTKRP {
		for m, d := range dims {
			if m != mode {
				shapes = append(shapes, [2]int{d, rank})
			}
		}
		shapes = append(shapes, kernels.MTTKRPPadShapes(dims, mode, rank)...)
	}
	return shapes
}

// randomMatrix returns a rows x cols matrix with entries in [-1, 1).
func randomMatrix(rng *rand.Rand, rows, cols int) *kernels.Matrix {
	a := kernels.NewMatrix(rows, cols)
	for i := range a.Data {
		a.Data[i] = 2*rng.Float32() - 1
	}
	return a
}

// median returns the median of v, which it sorts.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
