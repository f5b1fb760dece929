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
	if mode < 0 || mode >= x.Order() {
		return nil, fmt.Errorf("mode %d out of range 1 to %d", mode+1, x.Order())
	}
	if rank < 1 {
		return nil, fmt.Errorf("rank must be at least 1, found %d", rank)
	}
	if runs == nil {
		return nil, errors.New("no rule for the number of runs")
	}
	m := &Measurement{Op: op, Mode: mode, Format: format, Device: d.Info().Name, Rank: rank}
	rng := rand.New(rand.NewPCG(uint64(mode), uint64(rank)))
	var job Job
	switch op {
	case SpTTM:
		start := time.Now()
		fm, err := formats.NewFiberMatrix(x, mode, formats.DefaultSliceMode(mode))
		if err != nil {
			return nil, err
		}
		if format == "ell" {
			if slots := int64(fm.Rows()) * int64(fm.MaxRowLen()); slots > formats.MaxELLSlotsPerNNZ*int64(max(fm.NNZ(), 1)) {
				m.Skipped = fmt.Sprintf("ell would hold %.0f slots per nonzero (limit %d)", float64(slots)/float64(fm.NNZ()), formats.MaxELLSlotsPerNNZ)
				return m, nil
			}
		}
		f, err := formats.NewFiberFormat(fm, format)
		if err != nil {
			return nil, err
		}
		m.ConvertSeconds = time.Since(start).Seconds()
		m.FormatBytes = f.Bytes() + fm.FiberBytes()
		ut := randomMatrix(rng, x.Dims[mode], rank)
		out := kernels.NewMatrix(fm.Rows(), rank)
		if job, err = d.SpTTM(f, ut, out); IsUnsupported(err) {
			m.Skipped = err.Error()
			return m, nil
		} else if err != nil {
			return nil, err
		}
	case MTTKRP:
		start := time.Now()
		f, err := formats.NewTensorFormat(x, format, mode)
		if err != nil {
			return nil, err
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
		if job, err = d.MTTKRP(f, mode, factors, out); IsUnsupported(err) {
			m.Skipped = err.Error()
			return m, nil
		} else if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown op %v", op)
	}
	defer job.Close()
	// Collect the conversion's garbage now: a collection running beside the
	// timed runs takes a core from them (measured: an ALTO MTTKRP 25%
	// slower inside a full bench than alone).
	runtime.GC()
	if w, ok := job.(interface{ WorkspaceBytes() int64 }); ok {
		m.WorkspaceBytes = w.WorkspaceBytes()
	}
	warm, err := job.Run()
	if err != nil {
		return nil, err
	}
	iters := max(runs(warm.Total()), 1)
	m.Iters = iters
	kernel, h2d, d2h := make([]float64, iters), make([]float64, iters), make([]float64, iters)
	for i := range iters {
		t, err := job.Run()
		if err != nil {
			return nil, err
		}
		kernel[i], h2d[i], d2h[i] = t.Kernel.Seconds(), t.HostToDevice.Seconds(), t.DeviceToHost.Seconds()
	}
	m.Seconds, m.HostToDevice, m.DeviceToHost = median(kernel), median(h2d), median(d2h)
	m.MinSeconds = slices.Min(kernel)
	m.Flops, m.Bytes = job.Flops(), job.Bytes()
	if m.Seconds > 0 {
		m.GFlops = m.Flops / m.Seconds / 1e9
		m.GBs = m.Bytes / m.Seconds / 1e9
	}
	return m, nil
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
