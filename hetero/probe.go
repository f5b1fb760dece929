package hetero

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/kernels/accel"
)

// A probe measures one rate of a device; what it returns says how.
type probeResult struct {
	rate float64 // GFLOP/s or GB/s
	how  string
}

// probeSize is how long and how large calibration's probes run.
type probeSize struct {
	trials     int
	target     time.Duration // the least time one FMA trial should take
	arrayBytes int64         // each triad array
	linkBytes  int64         // one host-to-device copy
}

func probeSizes(quick bool) probeSize {
	if quick {
		return probeSize{trials: 5, target: 20 * time.Millisecond, arrayBytes: 32 << 20, linkBytes: 32 << 20}
	}
	return probeSize{trials: 5, target: 200 * time.Millisecond, arrayBytes: DefaultProbeBytes, linkBytes: 128 << 20}
}

// prober is a device calibration measures directly.
type prober interface {
	probeFMA(ctx context.Context, s probeSize) (probeResult, error)
	probeMemory(ctx context.Context, s probeSize) (probeResult, error)
	probeLink(ctx context.Context, s probeSize) (probeResult, error)
}

// cpuFMAChains is the number of independent multiply-add chains of
// fmaLoop: enough to cover the latency of a multiply and an add on every
// pipe (12 chains of two 3-4 cycle operations), few enough to stay in
// registers.
const cpuFMAChains = 12

// fmaLoop runs iters rounds of cpuFMAChains independent float32
// multiply-adds x = x·b + c and returns the sum of the chains. It is not
// inlined and its result is checked by the caller, so the compiler can
// neither drop nor fold the loop (iters, b and c are not constants).
//
//go:noinline
func fmaLoop(iters int, b, c float32) float32 {
	x0, x1, x2, x3 := float32(0.0), float32(0.1), float32(0.2), float32(0.3)
	x4, x5, x6, x7 := float32(0.4), float32(0.5), float32(0.6), float32(0.7)
	x8, x9, x10, x11 := float32(0.8), float32(0.9), float32(1.0), float32(1.1)
	for range iters {
		x0 = x0*b + c
		x1 = x1*b + c
		x2 = x2*b + c
		x3 = x3*b + c
		x4 = x4*b + c
		x5 = x5*b + c
		x6 = x6*b + c
		x7 = x7*b + c
		x8 = x8*b + c
		x9 = x9*b + c
		x10 = x10*b + c
		x11 = x11*b + c
	}
	return ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) + ((x8 + x9) + (x10 + x11))
}

// vectorLanes returns the float32 lanes of the CPU kernels' inner loops
// (kernels.InnerLoops): 16 for AVX-512, 8 for AVX2, 1 for the portable Go
// loops.
func vectorLanes(innerLoops string) int {
	switch {
	case strings.HasPrefix(innerLoops, "avx512"):
		return 16
	case strings.HasPrefix(innerLoops, "avx2"):
		return 8
	}
	return 1
}

// probeFMA measures the CPU's peak: fmaLoop on every thread at once, the
// fastest of the trials, times the vector lanes of the kernels' inner
// loops. Go does not vectorise, so the loop measures one float32 lane per
// instruction; the kernels' assembly runs vectorLanes of them.
func (d *CPUDevice) probeFMA(ctx context.Context, s probeSize) (probeResult, error) {
	const b, c = 0.999, 0.001 // chains converge to c/(1-b) = 1
	iters := 1 << 16
	var best time.Duration
	for trial := 0; trial < s.trials; {
		if err := ctx.Err(); err != nil {
			return probeResult{}, err
		}
		sums := make([]float32, d.threads)
		start := time.Now()
		par.Range(d.threads, d.threads, func(_, lo, hi int) {
			for t := lo; t < hi; t++ {
				sums[t] = fmaLoop(iters, b, c)
			}
		})
		el := time.Since(start)
		for _, v := range sums {
			if !(v > 0 && v < 2*cpuFMAChains) {
				return probeResult{}, fmt.Errorf("fma probe: the loop computed %v, expected about %d", v, cpuFMAChains)
			}
		}
		if el < s.target && iters < 1<<30 { // too short to time well: longer
			iters *= 2
			continue
		}
		if trial == 0 || el < best {
			best = el
		}
		trial++
	}
	scalar := 2 * cpuFMAChains * float64(iters) * float64(d.threads) / best.Seconds() / 1e9
	loops := kernels.InnerLoops()
	lanes := vectorLanes(loops)
	return probeResult{rate: scalar * float64(lanes), how: fmt.Sprintf(
		"Go loop of %d float32 multiply-add chains on %d threads: %.2f GFLOP/s scalar, x %d lanes of the %s inner loops",
		cpuFMAChains, d.threads, scalar, lanes, loops)}, nil
}

// probeMemory is MemoryBandwidth on the device's threads.
func (d *CPUDevice) probeMemory(ctx context.Context, s probeSize) (probeResult, error) {
	if err := ctx.Err(); err != nil {
		return probeResult{}, err
	}
	bw, err := MemoryBandwidth(d.threads, s.arrayBytes, s.trials)
	if err != nil {
		return probeResult{}, err
	}
	return probeResult{rate: bw.GBs, how: fmt.Sprintf("STREAM triad, 3 x %s arrays, %d threads, best of %d",
		formatBytes(bw.Bytes), bw.Threads, bw.Trials)}, nil
}

// probeLink: the CPU works in host memory, nothing is transferred.
func (d *CPUDevice) probeLink(context.Context, probeSize) (probeResult, error) {
	return probeResult{rate: 0, how: "none: the CPU works in host memory (0 = no transfer)"}, nil
}

// probeFMA runs the fma_peak kernel over 8 work-groups per compute unit
// and reports the fastest trial by the device's own timer.
func (d *accelDevice) probeFMA(ctx context.Context, s probeSize) (probeResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	items := max(d.info.ComputeUnits, 1) * d.group * 8
	var a deviceArrays
	a.rt = d.rt
	out := a.alloc(4 * items)
	if a.err != nil {
		return probeResult{}, d.failed(&a, a.err)
	}
	iters := 256
	var best time.Duration
	for trial := 0; trial < s.trials; {
		if err := ctx.Err(); err != nil {
			return probeResult{}, errors.Join(err, a.free())
		}
		ev, err := d.rt.queue(0).launch(accel.FMAPeak, items, d.group, uint32(iters), float32(0.999), float32(0.001), out)
		var el time.Duration
		if err == nil {
			err = timed(ev, &el)
		}
		if err != nil {
			return probeResult{}, d.failed(&a, fmt.Errorf("fma probe: %w", err))
		}
		if el < s.target && iters < 1<<24 {
			iters *= 2
			continue
		}
		if trial == 0 || el < best {
			best = el
		}
		trial++
	}
	if err := a.free(); err != nil {
		return probeResult{}, err
	}
	if best <= 0 {
		return probeResult{}, fmt.Errorf("%s: fma probe: the device timer reported no time", d.info.Name)
	}
	flops := 2 * accel.FMAChains * float64(iters) * float64(items)
	return probeResult{rate: flops / best.Seconds() / 1e9, how: fmt.Sprintf(
		"%s kernel, %d work-items x %d multiply-add chains x %d rounds, best of %d", accel.FMAPeak, items, accel.FMAChains, iters, s.trials)}, nil
}

// probeMemory runs the triad kernel on three device arrays (at most a
// third of the memory budget and the largest allocation each).
func (d *accelDevice) probeMemory(ctx context.Context, s probeSize) (probeResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	size := min(s.arrayBytes, d.maxAlloc, d.budget/3) / 4 * 4
	n := int(size / 4)
	if n < d.group {
		return probeResult{}, fmt.Errorf("%s: memory probe: no room for three arrays in the memory budget of %s", d.info.Name, formatBytes(d.budget))
	}
	var a deviceArrays
	a.rt = d.rt
	x, y, z := a.alloc(4*n), a.alloc(4*n), a.alloc(4*n)
	if a.err != nil {
		return probeResult{}, d.failed(&a, a.err)
	}
	q := d.rt.queue(0)
	var best time.Duration
	for trial := -1; trial < s.trials; trial++ { // trial -1 touches the pages
		if err := ctx.Err(); err != nil {
			return probeResult{}, errors.Join(err, a.free())
		}
		var el time.Duration
		var err error
		if trial < 0 {
			for _, m := range []devMem{x, y, z} {
				var ev devEvent
				if ev, err = q.launch(accel.FillZero, groups(n, d.group), d.group, uint64(n), m); err == nil {
					err = timed(ev, &el)
				}
				if err != nil {
					break
				}
			}
		} else {
			var ev devEvent
			if ev, err = q.launch(accel.Triad, groups(n, d.group), d.group, uint64(n), float32(3), x, y, z); err == nil {
				err = timed(ev, &el)
			}
		}
		if err != nil {
			return probeResult{}, d.failed(&a, fmt.Errorf("memory probe: %w", err))
		}
		if trial >= 0 && (trial == 0 || el < best) {
			best = el
		}
	}
	if err := a.free(); err != nil {
		return probeResult{}, err
	}
	if best <= 0 {
		return probeResult{}, fmt.Errorf("%s: memory probe: the device timer reported no time", d.info.Name)
	}
	return probeResult{rate: 12 * float64(n) / best.Seconds() / 1e9, how: fmt.Sprintf(
		"%s kernel (STREAM triad), 3 x %s arrays, best of %d", accel.Triad, formatBytes(int64(4*n)), s.trials)}, nil
}

// probeLink times copies of a host buffer into device memory by the
// device's timer, the way jobs upload their data.
func (d *accelDevice) probeLink(ctx context.Context, s probeSize) (probeResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := int(min(s.linkBytes, d.maxAlloc, d.budget))
	if n < 1<<20 {
		return probeResult{}, fmt.Errorf("%s: link probe: no room for a 1 MiB buffer in the memory budget of %s", d.info.Name, formatBytes(d.budget))
	}
	host := make([]byte, n)
	for i := range host {
		host[i] = byte(i)
	}
	var a deviceArrays
	a.rt = d.rt
	buf := a.alloc(n)
	if a.err != nil {
		return probeResult{}, d.failed(&a, a.err)
	}
	var best time.Duration
	for trial := -1; trial < s.trials; trial++ { // trial -1 warms the path
		if err := ctx.Err(); err != nil {
			return probeResult{}, errors.Join(err, a.free())
		}
		var el time.Duration
		ev, err := d.rt.queue(0).write(buf, 0, host)
		if err == nil {
			err = timed(ev, &el)
		}
		if err != nil {
			return probeResult{}, d.failed(&a, fmt.Errorf("link probe: %w", err))
		}
		if trial >= 0 && (trial == 0 || el < best) {
			best = el
		}
	}
	if err := a.free(); err != nil {
		return probeResult{}, err
	}
	if best <= 0 {
		return probeResult{}, fmt.Errorf("%s: link probe: the device timer reported no time", d.info.Name)
	}
	return probeResult{rate: float64(n) / best.Seconds() / 1e9, how: fmt.Sprintf(
		"host-to-device copy of %s from Go memory, best of %d", formatBytes(int64(n)), s.trials)}, nil
}
