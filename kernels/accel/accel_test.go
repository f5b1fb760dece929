package accel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		b    Backend
		want []string
	}{
		{OpenCL, []string{"#define KERNEL __kernel", "atomic_cmpxchg", "#define WG 128"}},
		{CUDA, []string{`#define KERNEL extern "C" __global__`, "atomicAdd", "#define WG 128"}},
	} {
		src, err := Source(tc.b, 128)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range append(tc.want, "KERNEL void "+MTTKRPALTO+"(", "KERNEL void "+SpTTMCSR+"(") {
			if !strings.Contains(src, w) {
				t.Errorf("%v source lacks %q", tc.b, w)
			}
		}
	}
	// Every kernel name the backends look up is defined in the body.
	for _, name := range []string{FillZero, SpTTMCSR, SpTTMELL, SpTTMCOO, MTTKRPCOO, MTTKRPCSF, MTTKRPALTO, PhiCOO, FMAPeak, Triad} {
		if !strings.Contains(body, "KERNEL void "+name+"(") {
			t.Errorf("body lacks kernel %s", name)
		}
	}
	if _, err := Source(Backend(7), 64); err == nil {
		t.Error("unknown backend accepted")
	}
	if _, err := Source(OpenCL, 0); err == nil {
		t.Error("work-group size 0 accepted")
	}
}

// clangCUDAPrelude declares what NVRTC provides and clang's CUDA mode
// lacks without the CUDA headers: the execution-space attributes and
// atomicAdd on floats.
const clangCUDAPrelude = `#include "__clang_cuda_builtin_vars.h"
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
__device__ inline float atomicAdd(float *p, float v) { return __nvvm_atom_add_gen_f(p, v); }
`

// TestCUDASourceCompiles compiles the CUDA flavour of the kernels to PTX
// with clang, which PoCL installs, so that a machine without a GPU still
// catches a change to body.cl or cuda.h that NVRTC would refuse.
func TestCUDASourceCompiles(t *testing.T) {
	var clang string
	for _, name := range []string{"clang-15", "clang-16", "clang-14", "clang"} {
		if p, err := exec.LookPath(name); err == nil {
			clang = p
			break
		}
	}
	if clang == "" {
		t.Skip("no clang to compile the CUDA source with (PoCL's package installs clang-15)")
	}
	src, err := Source(CUDA, 256)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "kernels.cu"), filepath.Join(dir, "kernels.ptx")
	if err := os.WriteFile(in, []byte(clangCUDAPrelude+src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(clang, "-x", "cuda", "--cuda-gpu-arch=sm_80", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"-Werror", "-S", "-o", out, in)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", clang, err, msg)
	}
	ptx, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{FillZero, SpTTMCSR, SpTTMELL, SpTTMCOO, MTTKRPCOO, MTTKRPCSF, MTTKRPALTO, PhiCOO, FMAPeak, Triad} {
		if !strings.Contains(string(ptx), ".entry "+name+"(") {
			t.Errorf("PTX has no entry %s", name)
		}
	}
}
