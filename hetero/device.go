package hetero

import (
	"fmt"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// Kind is the kind of a device: the host CPU or an accelerator. Info.Class
// names the hardware more finely (a PoCL device is an accelerator of class
// "opencl-cpu"): predictor heads are per class.
type Kind int

const (
	CPU Kind = iota // the host's cores, running package kernels
	GPU             // an accelerator reached through OpenCL or CUDA
)

func (k Kind) String() string {
	switch k {
	case CPU:
		return "cpu"
	case GPU:
		return "gpu"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MarshalText writes the kind as its name, for JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name, for JSON.
func (k *Kind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "cpu":
		*k = CPU
	case "gpu":
		*k = GPU
	default:
		return fmt.Errorf("unknown device kind %q, expected cpu or gpu", b)
	}
	return nil
}

// Info describes a device.
type Info struct {
	Name   string `json:"name"` // how the CLI names it: "cpu", "opencl:0", "cuda:0"
	Kind   Kind   `json:"kind"`
	Vendor string `json:"vendor"`
	Model  string `json:"model"`
	// Family is a CPU's family number as the processor reports it (on
	// x86, CPUID's display family, Linux's "cpu family": 0x19 for AMD's
	// Zen 3 and Zen 4, 0x1A for Zen 5, 6 for Intel's cores), 0 where
	// unknown: other operating systems and architectures, accelerators.
	// A model name does not always tell generations apart (a VM's may
	// read "AMD EPYC" on Zen 4 and Zen 5 alike), and the fastest format
	// is not the same on both (docs/model.md, "Labels belong to the
	// processor's generation").
	Family       int    `json:"family,omitempty"`
	ComputeUnits int    `json:"compute_units"` // cores (CPU: the threads the kernels use) or compute units / SMs
	ClockMHz     int    `json:"clock_mhz"`
	GlobalMemory int64  `json:"global_memory_bytes"`
	Driver       string `json:"driver"` // driver / runtime version; the Go version for the CPU
	// Type is the hardware the device is: "cpu", "gpu" or "accelerator"
	// (OpenCL's CL_DEVICE_TYPE; PoCL's device is a "cpu"), "other" for
	// anything else. The host CPU device is "cpu".
	Type string `json:"type"`
}

// Class names the kind of hardware the device is, so that a predictor head
// trained on one is never applied to another: "cpu" for the host's cores
// running package kernels, else the backend and Type joined by a dash,
// such as "opencl-cpu" (PoCL), "opencl-gpu" or "cuda-gpu". An Info with no
// Type counts as a GPU.
func (i Info) Class() string {
	if i.Kind == CPU {
		return "cpu"
	}
	backend, _, _ := strings.Cut(i.Name, ":")
	if backend == "" {
		backend = "accel"
	}
	typ := i.Type
	if typ == "" {
		typ = "gpu"
	}
	return backend + "-" + typ
}

// Timing is how long one run took, by phase. The CPU/accelerator split
// needs the phases apart: transfers cost what the link allows, the kernel
// what the device does. On the CPU only Kernel is non-zero.
type Timing struct {
	HostToDevice time.Duration
	Kernel       time.Duration
	DeviceToHost time.Duration
}

// Total returns the sum of the phases.
func (t Timing) Total() time.Duration { return t.HostToDevice + t.Kernel + t.DeviceToHost }

// Job is an operation bound to its data on a device: the tensor in one
// format, the dense operands and the output. Building a job does the
// one-off work (planning, uploads); Run executes the kernel and leaves the
// result in the output matrix, and can be called again. Every Run reads
// the operands and writes the output through the *kernels.Matrix values
// given at binding, as they are at that call: between runs a caller may
// change their contents, or point them at other data of the same shape
// (package engine's plans do, to run new operands without rebinding).
type Job interface {
	Run() (Timing, error)
	// Flops returns the flops of one run (SpTTM 2·nnz·R, MTTKRP N·nnz·R).
	Flops() float64
	// Bytes returns the bytes one run moves by the kernel's documented
	// compulsory-traffic model.
	Bytes() float64
	// Close releases what the job holds on the device.
	Close() error
}

// Device runs SpTTM and MTTKRP on data in a format it is told.
type Device interface {
	Info() Info
	// SpTTM binds Y = F·Uᵀ: ut is Uᵀ (Dims[Mode] x R), out is Rows() x R.
	SpTTM(f formats.FiberFormat, ut, out *kernels.Matrix) (Job, error)
	// MTTKRP binds the MTTKRP of x for a 0-based mode: factors hold one
	// Dims[m] x R matrix per mode (the mode's own is not read), out is
	// Dims[mode] x R.
	MTTKRP(x formats.TensorFormat, mode int, factors []*kernels.Matrix, out *kernels.Matrix) (Job, error)
}
