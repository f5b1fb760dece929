package hetero

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero/opencl"
	"github.com/sparsetune/sparsetune/kernels"
	"github.com/sparsetune/sparsetune/kernels/accel"
)

// accelerators returns the accelerator devices to test. A backend whose
// variable is set (SPARSETUNE_OPENCL_TESTS=1 for OpenCL, as in CI on PoCL;
// SPARSETUNE_GPU_TESTS=1 for CUDA) must have a device; otherwise a missing
// one is skipped with the reason.
func accelerators(t *testing.T) []*accelDevice {
	t.Helper()
	required := map[string]string{"opencl": "SPARSETUNE_OPENCL_TESTS", "cuda": "SPARSETUNE_GPU_TESTS"}
	var devs []*accelDevice
	var why []string
	for _, b := range Backends() {
		env := required[b.Name]
		if b.Missing != "" {
			if os.Getenv(env) == "1" {
				t.Fatalf("%s=1 but the %s backend has no device: %s", env, b.Name, b.Missing)
			}
			why = append(why, b.Name+": "+b.Missing)
			continue
		}
		for _, info := range b.Devices {
			d, err := Lookup(info.Name, 0)
			if err != nil {
				t.Fatal(err)
			}
			devs = append(devs, d.(*accelDevice))
		}
	}
	if len(devs) == 0 {
		t.Skipf("no accelerator: %s", strings.Join(why, "; "))
	}
	return devs
}

// agree binds every accelerator format of x for every mode, runs it and
// checks the result against the references, at each rank.
func agree(t *testing.T, dev Device, x *formats.COO, ranks []int, rng *rand.Rand) {
	t.Helper()
	for mode := range x.Order() {
		for _, R := range ranks {
			factors := randomFactors(rng, x.Dims, R)
			want, err := kernels.MTTKRPReference(x, mode, factors)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"coo", "csf", "alto"} {
				f, err := formats.NewTensorFormat(x, name, mode)
				if err != nil {
					t.Fatal(err)
				}
				out := kernels.NewMatrix(x.Dims[mode], R)
				checkJob(t, fmt.Sprintf("mttkrp %s mode %d R %d", name, mode+1, R), out, want, func() (Job, error) {
					return dev.MTTKRP(f, mode, factors, out)
				})
			}
			if x.Order() < 2 {
				continue
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
				if name == "ell" && int64(fm.Rows())*int64(fm.MaxRowLen()) > formats.MaxELLSlotsPerNNZ*int64(fm.NNZ()) {
					continue // too padded to build, as the bench skips it
				}
				f, err := formats.NewFiberFormat(fm, name)
				if err != nil {
					t.Fatal(err)
				}
				out := kernels.NewMatrix(fm.Rows(), R)
				checkJob(t, fmt.Sprintf("ttm %s mode %d R %d", name, mode+1, R), out, wantY, func() (Job, error) {
					return dev.SpTTM(f, ut, out)
				})
			}
		}
	}
}

// checkJob binds a job, runs it twice (the second run must not see the
// first's output) and closes it.
func checkJob(t *testing.T, what string, out *kernels.Matrix, want []float64, bind func() (Job, error)) {
	t.Helper()
	job, err := bind()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer func() {
		if err := job.Close(); err != nil {
			t.Errorf("%s: close: %v", what, err)
		}
	}()
	for run := range 2 {
		for i := range out.Data {
			out.Data[i] = float32(i%7) - 3 // the job must overwrite it
		}
		timing, err := job.Run()
		if err != nil {
			t.Fatalf("%s: run %d: %v", what, run, err)
		}
		if e := relErr(out.Data, want); !(e <= 1e-4) {
			t.Errorf("%s: run %d: relative error %.3g", what, run, e)
			return
		}
		if timing.Kernel <= 0 && len(want) > 0 {
			t.Errorf("%s: kernel time %v", what, timing.Kernel)
		}
	}
}

func TestAccelAgreeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 4))
	shapes := [][]int{{50, 40}, {30, 20, 10}, {9, 1, 13, 6}, {6, 5, 4, 3, 7}, {1 << 20, 3, 1 << 18}}
	for _, dev := range accelerators(t) {
		for _, dims := range shapes {
			t.Run(dev.Info().Name+"/"+formats.FormatDims(dims), func(t *testing.T) {
				x := randomTensor(t, rng, dims, 3000)
				agree(t, dev, x, []int{1, 7, 16, 33}, rng)
			})
		}
		t.Run(dev.Info().Name+"/empty", func(t *testing.T) {
			x := randomTensor(t, rng, []int{5, 4, 3}, 0)
			agree(t, dev, x, []int{4}, rng)
		})
	}
}

// TestAccelAgreeLongRuns puts every nonzero in a few output rows, so runs
// of one row cross work-items and work-groups: the run reductions and
// atomic updates must still add up.
func TestAccelAgreeLongRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 4))
	x, err := formats.NewCOO([]int{3, 200, 500}, 20000)
	if err != nil {
		t.Fatal(err)
	}
	for range 20000 {
		x.Append([]uint32{uint32(rng.IntN(3)), uint32(rng.IntN(200)), uint32(rng.IntN(500))}, rng.Float32())
	}
	for _, dev := range accelerators(t) {
		agree(t, dev, x, []int{5}, rng)
	}
}

func TestAccelAgreeRealTensors(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "data", "tensors")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.tns"))
	if len(paths) == 0 {
		t.Skipf("no real tensors in %s (the shared data directory is absent)", dir)
	}
	devs := accelerators(t)
	rng := rand.New(rand.NewPCG(42, 4))
	for _, path := range paths {
		x, err := formats.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, dev := range devs {
			t.Run(dev.Info().Name+"/"+strings.TrimSuffix(filepath.Base(path), ".tns"), func(t *testing.T) {
				agree(t, dev, x, []int{16}, rng)
			})
		}
	}
}

// TestAccelStreaming caps the memory budget so the tensor must be sent in
// at least four pieces, and checks the result and that the budget held.
func TestAccelStreaming(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 4))
	x := randomTensor(t, rng, []int{300, 200, 100}, 40000)
	const R = 8
	for _, dev := range accelerators(t) {
		t.Run(dev.Info().Name, func(t *testing.T) {
			a, err := formats.NewALTO(x, 0)
			if err != nil {
				t.Fatal(err)
			}
			for mode := range x.Order() {
				factors := randomFactors(rng, x.Dims, R)
				want, err := kernels.MTTKRPReference(x, mode, factors)
				if err != nil {
					t.Fatal(err)
				}
				facLen := 0
				for m, d := range x.Dims {
					if m != mode {
						facLen += d * R
					}
				}
				dense := 4*int64(facLen+x.Dims[mode]*R) + 8*16*int64(x.Order())
				// Room for two staging pieces of a quarter of the tensor
				// at most, so at least four pieces.
				budget := dense + 2*12*int64(x.NNZ()/4)
				saved := dev.MemoryBudget()
				dev.SetMemoryBudget(budget)
				out := kernels.NewMatrix(x.Dims[mode], R)
				var streamed int
				checkJob(t, fmt.Sprintf("streamed mttkrp mode %d", mode+1), out, want, func() (Job, error) {
					job, err := dev.MTTKRP(a, mode, factors, out)
					if err == nil {
						streamed = job.(*accelJob).streamed
					}
					return job, err
				})
				dev.SetMemoryBudget(saved)
				t.Logf("mode %d: %d pieces under a budget of %d bytes", mode+1, streamed, budget)
				if streamed < 4 {
					t.Errorf("mode %d: streamed in %d pieces, want >= 4", mode+1, streamed)
				}
			}
			// Formats that cannot stream say so.
			dev.SetMemoryBudget(1 << 10)
			defer dev.SetMemoryBudget(0)
			f, err := formats.NewTensorFormat(x, "coo", 0)
			if err != nil {
				t.Fatal(err)
			}
			factors := randomFactors(rng, x.Dims, R)
			if _, err := dev.MTTKRP(f, 0, factors, kernels.NewMatrix(x.Dims[0], R)); err == nil || !strings.Contains(err.Error(), "over the budget") {
				t.Errorf("coo over the budget: %v", err)
			}
			if _, err := dev.MTTKRP(a, 0, factors, kernels.NewMatrix(x.Dims[0], R)); err == nil || !strings.Contains(err.Error(), "no room to stream") {
				t.Errorf("alto with no room: %v", err)
			}
		})
	}
}

// TestAccelNoLeak runs the agreement suite 100 times in one process: the
// device objects must come back to where they were after every run, and
// the process's resident memory must not grow (PoCL's device memory is
// host memory, so a leaked buffer would show).
func TestAccelNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("100 rounds of the agreement suite; skipped in -short")
	}
	rng := rand.New(rand.NewPCG(44, 4))
	x := randomTensor(t, rng, []int{40, 30, 20}, 5000)
	for _, dev := range accelerators(t) {
		t.Run(dev.Info().Name, func(t *testing.T) {
			before := dev.rt.live()
			var rss [2]int64
			for round := range 100 {
				agree(t, dev, x, []int{8}, rng)
				if t.Failed() {
					return
				}
				if n := dev.rt.live(); n != before {
					t.Fatalf("round %d: %d device objects alive, %d before", round, n, before)
				}
				switch round {
				case 9:
					rss[0] = residentBytes(t)
				case 99:
					rss[1] = residentBytes(t)
				}
			}
			if grew := rss[1] - rss[0]; grew > 64<<20 {
				t.Errorf("resident memory grew by %d MiB from round 10 to round 100", grew>>20)
			}
			t.Logf("resident memory: %d MiB after round 10, %d MiB after round 100", rss[0]>>20, rss[1]>>20)
		})
	}
}

// residentBytes returns the process's resident set after a GC.
func residentBytes(t *testing.T) int64 {
	runtime.GC()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	fields := strings.Fields(string(b))
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

func TestAccelErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 4))
	x := randomTensor(t, rng, []int{10, 8, 6}, 200)
	for _, dev := range accelerators(t) {
		factors := randomFactors(rng, x.Dims, 4)
		name := dev.Info().Name
		h, err := formats.NewTensorFormat(x, "hicoo", 0)
		if err != nil {
			t.Fatal(err)
		}
		csf, err := formats.NewTensorFormat(x, "csf", 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			what string
			bind func() (Job, error)
			want string
		}{
			{"hicoo", func() (Job, error) { return dev.MTTKRP(h, 0, factors, kernels.NewMatrix(10, 4)) }, "no accelerator kernel for hicoo"},
			{"csf root", func() (Job, error) { return dev.MTTKRP(csf, 0, factors, kernels.NewMatrix(10, 4)) }, "rooted at mode 2"},
			{"output shape", func() (Job, error) { return dev.MTTKRP(x, 0, factors, kernels.NewMatrix(9, 4)) }, "output is 9x4"},
			{"factor shape", func() (Job, error) { return dev.MTTKRP(x, 0, factors[:2], kernels.NewMatrix(10, 4)) }, "2 factor matrices"},
			{"mode", func() (Job, error) { return dev.MTTKRP(x, 3, factors, kernels.NewMatrix(10, 4)) }, "mode 4 out of range"},
		} {
			job, err := tc.bind()
			if err == nil {
				job.Close()
				t.Errorf("%s %s: no error", name, tc.what)
			} else if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s %s: %v, want it to name the device and say %q", name, tc.what, err, tc.want)
			}
		}
		// A closed job refuses to run.
		job, err := dev.MTTKRP(x, 0, factors, kernels.NewMatrix(10, 4))
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := job.Run(); err == nil {
			t.Errorf("%s: a closed job ran", name)
		}
	}
}

// TestAccelMeasureSkipsBeforeConverting: a format the device has no
// kernel for is skipped with the device's own error, and no time or
// memory is spent converting the tensor to it; the others are timed.
func TestAccelMeasureSkipsBeforeConverting(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 5))
	x := randomTensor(t, rng, []int{12, 9, 7}, 300)
	for _, dev := range accelerators(t) {
		ms, err := MeasureFormats(dev, x, MTTKRP, 1, MTTKRP.Formats(), 4, func(time.Duration) int { return 1 })
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Format == "hicoo" {
				if want := dev.Info().Name + ": no accelerator kernel for hicoo"; !strings.HasPrefix(m.Skipped, want) || m.ConvertSeconds != 0 || m.FormatBytes != 0 || m.Iters != 0 {
					t.Errorf("%s hicoo: skipped %q (want it to start %q), converted in %g s to %d bytes, %d runs", dev.Info().Name, m.Skipped, want, m.ConvertSeconds, m.FormatBytes, m.Iters)
				}
			} else if m.Skipped != "" || m.ConvertSeconds <= 0 || !(m.Seconds > 0) {
				t.Errorf("%s %s: %+v", dev.Info().Name, m.Format, m)
			}
		}
		if err := dev.CheckFormat(MTTKRP, "coo"); err != nil {
			t.Errorf("%s: CheckFormat(coo): %v", dev.Info().Name, err)
		}
		for _, f := range SpTTM.Formats() {
			if err := dev.CheckFormat(SpTTM, f); err != nil {
				t.Errorf("%s: CheckFormat(spttm, %s): %v", dev.Info().Name, f, err)
			}
		}
	}
}

func TestLookupAccelerators(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"opencl:x", "unknown device"},
		{"opencl:-1", "unknown device"},
		{"metal:0", "unknown backend"},
		{"opencl:99", "opencl"},
	} {
		if _, err := Lookup(tc.name, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	names := Available()
	if names[0] != "cpu" {
		t.Fatalf("Available() = %v", names)
	}
	for _, name := range names[1:] {
		d, err := Lookup(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Lookup(name, 0)
		bname, idx, _ := strings.Cut(name, ":")
		padded, err := Lookup(bname+":0"+idx, 0)
		if err != nil || padded != d {
			t.Errorf("%s:0%s: %v, want the device %s", bname, idx, err, name)
		}
		if d != again || d.Info().Name != name || d.Info().Kind != GPU || d.Info().GlobalMemory <= 0 ||
			d.Info().Class() != bname+"-"+d.Info().Type || d.Info().Type == "" {
			t.Errorf("%s: %+v", name, d.Info())
		}
	}
}

// TestAccelBuildError opens an OpenCL device with kernels that do not
// compile: the error names the device and quotes the build log, and
// nothing is left open.
func TestAccelBuildError(t *testing.T) {
	devs, err := opencl.Devices()
	if err != nil || len(devs) == 0 {
		if os.Getenv("SPARSETUNE_OPENCL_TESTS") == "1" {
			t.Fatalf("SPARSETUNE_OPENCL_TESTS=1 but no OpenCL device: %v", err)
		}
		t.Skipf("no OpenCL device: %v", err)
	}
	src := "__kernel void fill_zero(ulong n, __global float *p) { p[n] = undefined_name; }\n"
	_, err = openOpenCLSource("opencl:test", devs[0], src, 64)
	if err == nil {
		t.Fatal("a kernel that does not compile was built")
	}
	var be *opencl.BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "opencl:test") || !strings.Contains(err.Error(), "undefined_name") {
		t.Errorf("error %v: want it to name the device and quote the log", err)
	}
}

// phiReference is CP-APR's Φ of x for mode, in float64, from its
// definition: for each nonzero, π the product of the other modes' factor
// rows, and Φ(i_n, :) += x / max(⟨B(i_n, :), π⟩, eps) · π.
func phiReference(x *formats.COO, mode int, factors []*kernels.Matrix, b *kernels.Matrix, eps float64) []float64 {
	R := b.Cols
	out := make([]float64, x.Dims[mode]*R)
	pi := make([]float64, R)
	for k := range x.NNZ() {
		for r := range pi {
			pi[r] = 1
		}
		for m, f := range factors {
			if m != mode {
				for r := range pi {
					pi[r] *= float64(f.Data[int(x.Inds[m][k])*R+r])
				}
			}
		}
		i := int(x.Inds[mode][k])
		var mv float64
		for r, v := range pi {
			mv += float64(b.Data[i*R+r]) * v
		}
		w := float64(x.Vals[k]) / max(mv, eps)
		for r, v := range pi {
			out[i*R+r] += w * v
		}
	}
	return out
}

// TestAccelPhi holds the accelerators' Φ to its float64 definition, on
// tensors sorted by the mode and not, orders 2 to 5, ranks up to the
// kernel's largest, and checks the rank limit's error.
func TestAccelPhi(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 5))
	for _, dev := range accelerators(t) {
		for _, dims := range [][]int{{50, 40}, {30, 20, 10}, {9, 3, 13, 6}, {6, 5, 4, 3, 7}} {
			x := randomTensor(t, rng, dims, 600)
			for i := range x.Vals {
				x.Vals[i] = float32(1 + rng.IntN(5)) // counts
			}
			for mode := range dims {
				for _, R := range []int{1, 16, accel.PhiMaxRank} {
					factors := randomFactors(rng, dims, R)
					for _, f := range factors {
						for i, v := range f.Data {
							f.Data[i] = max(v, -v) // non-negative, as CP-APR's
						}
					}
					b := factors[mode]
					want := phiReference(x, mode, factors, b, 1e-10)
					for _, sorted := range []bool{false, true} {
						xs := x
						if sorted {
							tf, err := formats.NewTensorFormat(x, "coo", mode)
							if err != nil {
								t.Fatal(err)
							}
							xs = tf.(*formats.COO)
						}
						out := kernels.NewMatrix(dims[mode], R)
						checkJob(t, fmt.Sprintf("%s: Φ %v mode %d R %d sorted %v", dev.info.Name, dims, mode+1, R, sorted), out, want, func() (Job, error) {
							return dev.Phi(xs, mode, factors, b, 1e-10, out)
						})
					}
				}
			}
		}
		x := randomTensor(t, rng, []int{5, 6, 7}, 50)
		factors := randomFactors(rng, x.Dims, accel.PhiMaxRank+1)
		out := kernels.NewMatrix(5, accel.PhiMaxRank+1)
		if _, err := dev.Phi(x, 0, factors, factors[0], 1e-10, out); err == nil || !strings.Contains(err.Error(), "rank up to") {
			t.Errorf("%s: Φ past the largest rank: %v", dev.info.Name, err)
		}
	}
}
