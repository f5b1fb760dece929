package cuda

import (
	"testing"

	"github.com/sparsetune/sparsetune/kernels/accel"
)

// The benchmarks below measure what a process pays before its first
// kernel on a GPU: a context, and NVRTC compiling the product's kernels
// to PTX then the driver loading them (docs/gpu.md). They need a GPU.

func BenchmarkNewContext(b *testing.B) {
	needGPU(b)
	devs, err := Devices()
	if err != nil || len(devs) == 0 {
		b.Fatalf("devices: %v %v", devs, err)
	}
	for b.Loop() {
		c, err := NewContext(devs[0])
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// kernelSource is the product's CUDA source, as hetero compiles it.
func kernelSource(b *testing.B) string {
	src, err := accel.Source(accel.CUDA, 256)
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkCompileKernels: NVRTC to PTX and the module load.
func BenchmarkCompileKernels(b *testing.B) {
	c := testContext(b)
	src := kernelSource(b)
	for b.Loop() {
		if _, err := c.Compile(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompilePTX: NVRTC alone.
func BenchmarkCompilePTX(b *testing.B) {
	needGPU(b)
	src := kernelSource(b)
	for b.Loop() {
		ptx, _, err := compilePTX(src, []string{"--gpu-architecture=compute_90"})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(ptx)), "ptx-bytes")
	}
}

// BenchmarkLoadPTX: the driver's module load of PTX already compiled
// (its JIT to the device's code, which the driver may cache on disk).
func BenchmarkLoadPTX(b *testing.B) {
	c := testContext(b)
	ptx, _, err := compilePTX(kernelSource(b), []string{c.Arch()})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.LoadPTX(ptx); err != nil {
			b.Fatal(err)
		}
	}
}
