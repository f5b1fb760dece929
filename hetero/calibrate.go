package hetero

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// CalibrateOptions says how much Calibrate measures.
type CalibrateOptions struct {
	// Quick uses smaller probes and a smaller tensor: a CPU and PoCL
	// together take a few seconds on two cores.
	Quick bool
	// Rank of the kernel runs; 0 for DefaultCalibrationRank.
	Rank int
	// Iters is the number of timed runs per format (after a warm-up); 0
	// for 3 (quick) or 10.
	Iters int
	// Progress, when set, is told each step as it starts.
	Progress func(device, step string)
}

// DefaultCalibrationRank is the rank of calibration's kernel runs.
const DefaultCalibrationRank = 16

// CalibrationSeed seeds the synthetic tensor of the kernel runs, so every
// calibration runs the same tensor.
const CalibrationSeed = 1

// calibrationFormats are the formats each operation is measured in: two
// each, that every device runs.
var calibrationFormats = map[Op][]string{SpTTM: {"csr", "coo"}, MTTKRP: {"coo", "csf"}}

// calibrationTensor returns the fixed synthetic tensor: order 3, indices
// drawn uniformly from a PCG seeded with CalibrationSeed (duplicates kept,
// as any COO may hold them).
func calibrationTensor(quick bool) (*formats.COO, string, error) {
	dims, nnz := []int{16384, 8192, 4096}, 2_000_000
	if quick {
		dims, nnz = []int{4096, 2048, 1024}, 250_000
	}
	x, err := formats.NewCOO(dims, nnz)
	if err != nil {
		return nil, "", err
	}
	rng := rand.New(rand.NewPCG(CalibrationSeed, 0x5eed))
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			idx[m] = uint32(rng.IntN(d))
		}
		x.Append(idx, 2*rng.Float32()-1)
	}
	desc := fmt.Sprintf("uniform random %dx%dx%d, %d nonzeros, PCG seed %d, mode 1", dims[0], dims[1], dims[2], nnz, CalibrationSeed)
	return x, desc, nil
}

// Calibrate measures each device and returns their profile (not saved:
// SaveProfile). Per device it measures the peak float32 multiply-add rate
// P, the memory bandwidth B_mem and the host-to-device bandwidth B_link
// (probes described in docs/hetero.md), then runs SpTTM and MTTKRP of
// mode 1 of a fixed synthetic tensor in two formats each (Measure) and
// derives from each run, with W its flops, M its tensor bytes and t its
// median kernel seconds:
//
//	μ = W / M
//	λ = W / (P · (t − M/B_mem)), set to 1 when t − M/B_mem ≤ W/P
//
// so that the model time W/(λP) + M/B_mem is the measured t. An
// operation's λ, μ and bytes per nonzero are those of its fastest format.
func Calibrate(ctx context.Context, devices []Device, opts CalibrateOptions) (*Profile, error) {
	if len(devices) == 0 {
		return nil, fmt.Errorf("calibrate: no devices")
	}
	if opts.Rank == 0 {
		opts.Rank = DefaultCalibrationRank
	}
	if opts.Rank < 1 {
		return nil, fmt.Errorf("calibrate: rank must be at least 1, found %d", opts.Rank)
	}
	if opts.Iters == 0 {
		opts.Iters = 10
		if opts.Quick {
			opts.Iters = 3
		}
	}
	if opts.Iters < 1 {
		return nil, fmt.Errorf("calibrate: iters must be at least 1, found %d", opts.Iters)
	}
	for _, d := range devices {
		if _, ok := d.(prober); !ok {
			return nil, fmt.Errorf("calibrate %s: not a device this package can measure (%T)", d.Info().Name, d)
		}
	}
	x, desc, err := calibrationTensor(opts.Quick)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	p := &Profile{Version: ProfileVersion}
	for _, d := range devices {
		dp, err := calibrateDevice(ctx, d, x, desc, opts)
		if err != nil {
			return nil, err
		}
		p.Set(dp)
	}
	return p, nil
}

func calibrateDevice(ctx context.Context, d Device, x *formats.COO, desc string, opts CalibrateOptions) (DeviceProfile, error) {
	start := time.Now()
	info := d.Info()
	host, _ := os.Hostname()
	dp := DeviceProfile{Name: info.Name, Kind: info.Kind, Model: info.Model, Ops: make(map[string]OpProfile),
		Calibration: CalibrationInfo{Time: start.UTC().Truncate(time.Second), Quick: opts.Quick, Host: host,
			GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version(), InnerLoops: kernels.InnerLoops(),
			Driver: info.Driver, ComputeUnits: info.ComputeUnits, Tensor: desc, Iters: opts.Iters}}
	progress := func(step string) {
		if opts.Progress != nil {
			opts.Progress(info.Name, step)
		}
	}
	fail := func(what string, err error) (DeviceProfile, error) {
		return DeviceProfile{}, fmt.Errorf("calibrate %s: %s: %w", info.Name, what, err)
	}
	pr := d.(prober)
	size := probeSizes(opts.Quick)
	for _, probe := range []struct {
		step string
		run  func(context.Context, probeSize) (probeResult, error)
		rate *float64
		how  *string
		zero bool // 0 is a valid result
	}{
		{"peak multiply-add rate", pr.probeFMA, &dp.FMAGFlops, &dp.Calibration.FMAMethod, false},
		{"memory bandwidth", pr.probeMemory, &dp.MemoryGBs, &dp.Calibration.MemoryMethod, false},
		{"host-to-device bandwidth", pr.probeLink, &dp.LinkGBs, &dp.Calibration.LinkMethod, true},
	} {
		if !(probe.zero && d.Info().Kind == CPU) {
			// The CPU's link is no probe: it works in host memory.
			progress(probe.step)
		}
		r, err := probe.run(ctx, size)
		if err != nil {
			return fail(probe.step, err)
		}
		if math.IsNaN(r.rate) || math.IsInf(r.rate, 0) || r.rate < 0 || (r.rate == 0 && !probe.zero) {
			return fail(probe.step, fmt.Errorf("measured %v", r.rate))
		}
		*probe.rate, *probe.how = r.rate, r.how
	}
	for _, op := range Ops {
		o := OpProfile{Rank: opts.Rank}
		fastest := -1
		for _, f := range calibrationFormats[op] {
			if err := ctx.Err(); err != nil {
				return fail(op.String(), err)
			}
			progress(op.String() + " " + f)
			m, err := Measure(d, x, op, 0, f, opts.Rank, opts.Iters)
			if err != nil {
				return fail(op.String()+" "+f, err)
			}
			run := OpRun{Format: f, Skipped: m.Skipped}
			if m.Skipped == "" {
				run = deriveRun(f, m.Seconds, m.Flops, float64(m.FormatBytes), dp.FMAGFlops, dp.MemoryGBs)
				if !(run.Seconds > 0) || !(run.Bytes > 0) || !(run.Flops > 0) {
					return fail(op.String()+" "+f, fmt.Errorf("run of %v s, %v flops, %v bytes", run.Seconds, run.Flops, run.Bytes))
				}
				if fastest < 0 || run.Seconds < o.Runs[fastest].Seconds {
					fastest = len(o.Runs)
				}
			}
			o.Runs = append(o.Runs, run)
		}
		if fastest < 0 {
			return fail(op.String(), fmt.Errorf("every format was skipped: %s", o.Runs[0].Skipped))
		}
		best := o.Runs[fastest]
		o.Lambda, o.Mu, o.Format = best.Lambda, best.Mu, best.Format
		o.BytesPerNNZ = best.Bytes / float64(x.NNZ())
		dp.Ops[op.String()] = o
	}
	dp.Calibration.Seconds = time.Since(start).Seconds()
	return dp, nil
}

// deriveRun derives λ and μ of one run from its seconds t, flops W and
// tensor bytes M, on a device of peak P GFLOP/s and memory bandwidth B
// GB/s, by the model t = W/(λP) + M/B (see Calibrate).
func deriveRun(format string, t, w, m, pGFlops, bGBs float64) OpRun {
	r := OpRun{Format: format, Seconds: t, Flops: w, Bytes: m}
	if m > 0 {
		r.Mu = w / m
	}
	compute := t - m/(bGBs*1e9)
	if floor := w / (pGFlops * 1e9); compute <= floor {
		r.Lambda, r.Clamped = 1, true
	} else {
		r.Lambda = w / (pGFlops * 1e9 * compute)
	}
	return r
}
