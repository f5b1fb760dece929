package heterotest

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/kernels"
)

// Accelerator is the CPU kernels on one thread behind an accelerator's
// name and kind ("fake:0", a GPU), so a split path runs on any machine,
// with switches to make its jobs fail.
type Accelerator struct {
	// FailRun makes the FailRun-th Run (counted from 1 over the device's
	// life) and every later one fail; 0 never fails.
	FailRun int64
	// FailBind makes binding fail with an error that is not
	// "unsupported".
	FailBind bool

	cpu  *hetero.CPUDevice
	runs atomic.Int64
}

// Name is the fake accelerator's device name.
const Name = "fake:0"

// NewAccelerator returns a fake accelerator that never fails.
func NewAccelerator() *Accelerator { return &Accelerator{cpu: hetero.NewCPU(1)} }

// Runs returns the number of job runs so far, failed ones included.
func (f *Accelerator) Runs() int64 { return f.runs.Load() }

// Info implements hetero.Device.
func (f *Accelerator) Info() hetero.Info {
	return hetero.Info{Name: Name, Kind: hetero.GPU, Type: "gpu", Model: "fake", ComputeUnits: 1}
}

// SpTTM implements hetero.Device.
func (f *Accelerator) SpTTM(x formats.FiberFormat, ut, out *kernels.Matrix) (hetero.Job, error) {
	if f.FailBind {
		return nil, errors.New("injected bind failure")
	}
	j, err := f.cpu.SpTTM(x, ut, out)
	return &job{Job: j, dev: f}, err
}

// MTTKRP implements hetero.Device.
func (f *Accelerator) MTTKRP(x formats.TensorFormat, mode int, factors []*kernels.Matrix, out *kernels.Matrix) (hetero.Job, error) {
	if f.FailBind {
		return nil, errors.New("injected bind failure")
	}
	j, err := f.cpu.MTTKRP(x, mode, factors, out)
	return &job{Job: j, dev: f}, err
}

// Phi implements hetero.PhiDevice: CP-APR's Φ from its definition, in Go,
// in float32 like the accelerators' kernel.
func (f *Accelerator) Phi(x *formats.COO, mode int, factors []*kernels.Matrix, b *kernels.Matrix, eps float32, out *kernels.Matrix) (hetero.Job, error) {
	if f.FailBind {
		return nil, errors.New("injected bind failure")
	}
	if mode < 0 || mode >= x.Order() || len(factors) != x.Order() || out.Rows != x.Dims[mode] || b.Rows != x.Dims[mode] || b.Cols != out.Cols {
		return nil, fmt.Errorf("%s: Φ of mode %d: operands do not match", Name, mode+1)
	}
	return &job{Job: &phiJob{x: x, mode: mode, factors: factors, b: b, eps: eps, out: out}, dev: f}, nil
}

// phiJob computes Φ on the host, one nonzero at a time.
type phiJob struct {
	x       *formats.COO
	mode    int
	factors []*kernels.Matrix
	b, out  *kernels.Matrix
	eps     float32
}

func (j *phiJob) Run() (hetero.Timing, error) {
	R := j.out.Cols
	clear(j.out.Data)
	pi := make([]float32, R)
	for k := range j.x.NNZ() {
		for r := range pi {
			pi[r] = 1
		}
		for m, f := range j.factors {
			if m != j.mode {
				row := f.Data[int(j.x.Inds[m][k])*R:]
				for r := range pi {
					pi[r] *= row[r]
				}
			}
		}
		i := int(j.x.Inds[j.mode][k])
		var mv float32
		for r, v := range pi {
			mv += j.b.Data[i*R+r] * v
		}
		w := j.x.Vals[k] / max(mv, j.eps)
		for r, v := range pi {
			j.out.Data[i*R+r] += w * v
		}
	}
	return hetero.Timing{Kernel: 1}, nil
}

func (j *phiJob) Flops() float64 { return float64(j.x.NNZ() * j.out.Cols * (j.x.Order() + 3)) }
func (j *phiJob) Bytes() float64 { return float64(j.x.Bytes()) }
func (j *phiJob) Close() error   { return nil }

type job struct {
	hetero.Job
	dev *Accelerator
}

func (j *job) Run() (hetero.Timing, error) {
	n := j.dev.runs.Add(1)
	if j.dev.FailRun > 0 && n >= j.dev.FailRun {
		// The output is left as it is: a failed job's output must never
		// reach a result.
		return hetero.Timing{}, fmt.Errorf("%s: injected device error on run %d", Name, n)
	}
	return j.Job.Run()
}

// Profile gives the named devices equal made-up numbers for both ops (the
// device named "cpu" is the CPU, without a link), so peak and dynamic
// split about evenly between the CPU and an accelerator.
func Profile(names ...string) *hetero.Profile {
	p := &hetero.Profile{Version: hetero.ProfileVersion}
	for _, name := range names {
		d := hetero.DeviceProfile{Name: name, Kind: hetero.GPU, FMAGFlops: 100, MemoryGBs: 20, LinkGBs: 20,
			Ops: map[string]hetero.OpProfile{
				"ttm":    {Lambda: 0.1, Mu: 1.5, BytesPerNNZ: 16, Format: "csr", Rank: 16},
				"mttkrp": {Lambda: 0.1, Mu: 3, BytesPerNNZ: 16, Format: "coo", Rank: 16},
			}}
		if name == "cpu" {
			d.Kind, d.LinkGBs = hetero.CPU, 0
		}
		p.Set(d)
	}
	return p
}

// Accelerators returns the accelerators a split test runs with: the fake
// always, and the first OpenCL device when there is one (PoCL in CI). When
// SPARSETUNE_OPENCL_TESTS=1 a missing OpenCL device fails the test, as in
// package hetero's tests.
func Accelerators(t testing.TB) []hetero.Device {
	t.Helper()
	devs := []hetero.Device{NewAccelerator()}
	if d := OpenCL(t); d != nil {
		devs = append(devs, d)
	}
	return devs
}

// OpenCL returns the first OpenCL device (PoCL in CI), or nil, logged,
// when there is none; when SPARSETUNE_OPENCL_TESTS=1 a missing one fails
// the test instead.
func OpenCL(t testing.TB) hetero.Device {
	t.Helper()
	for _, b := range hetero.Backends() {
		if b.Name != "opencl" {
			continue
		}
		if b.Missing != "" {
			if os.Getenv("SPARSETUNE_OPENCL_TESTS") == "1" {
				t.Fatalf("SPARSETUNE_OPENCL_TESTS=1 but the opencl backend has no device: %s", b.Missing)
			}
			t.Logf("no OpenCL device (%s): testing without one", b.Missing)
			return nil
		}
		d, err := hetero.Lookup(b.Devices[0].Name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return nil
}
