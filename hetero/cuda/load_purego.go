//go:build (linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64))

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// symbol is one entry point to resolve: a pointer to an api field and the
// C name.
type symbol struct {
	fn   any
	name string
}

// loadFrom opens the first library in cudaNames that loads and the first
// in nvrtcNames that loads, and resolves every entry point of api from
// them.
func loadFrom(cudaNames, nvrtcNames []string) (*api, error) {
	cudaLib, err := open(cudaNames)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (install the NVIDIA driver, which provides libcuda.so.1, or set %s)", ErrNoDriver, err, cudaEnv)
	}
	t := new(api)
	if err := resolve(cudaLib, []symbol{
		{&t.Init, "cuInit"},
		{&t.DriverGetVersion, "cuDriverGetVersion"},
		{&t.GetErrorName, "cuGetErrorName"},
		{&t.DeviceGetCount, "cuDeviceGetCount"},
		{&t.DeviceGet, "cuDeviceGet"},
		{&t.DeviceGetName, "cuDeviceGetName"},
		{&t.DeviceGetAttribute, "cuDeviceGetAttribute"},
		{&t.DeviceTotalMem, "cuDeviceTotalMem_v2"},
		{&t.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&t.PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&t.CtxPushCurrent, "cuCtxPushCurrent_v2"},
		{&t.CtxPopCurrent, "cuCtxPopCurrent_v2"},
		{&t.CtxSynchronize, "cuCtxSynchronize"},
		{&t.MemGetInfo, "cuMemGetInfo_v2"},
		{&t.MemAlloc, "cuMemAlloc_v2"},
		{&t.MemFree, "cuMemFree_v2"},
		{&t.MemHostAlloc, "cuMemHostAlloc"},
		{&t.MemFreeHost, "cuMemFreeHost"},
		{&t.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
		{&t.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&t.MemsetD8Async, "cuMemsetD8Async"},
		{&t.ModuleLoadData, "cuModuleLoadData"},
		{&t.ModuleUnload, "cuModuleUnload"},
		{&t.ModuleGetFunction, "cuModuleGetFunction"},
		{&t.LaunchKernel, "cuLaunchKernel"},
		{&t.StreamCreate, "cuStreamCreate"},
		{&t.StreamDestroy, "cuStreamDestroy_v2"},
		{&t.StreamSynchronize, "cuStreamSynchronize"},
		{&t.EventCreate, "cuEventCreate"},
		{&t.EventRecord, "cuEventRecord"},
		{&t.EventSynchronize, "cuEventSynchronize"},
		{&t.EventElapsedTime, "cuEventElapsedTime"},
		{&t.EventDestroy, "cuEventDestroy_v2"},
	}); err != nil {
		_ = purego.Dlclose(cudaLib)
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}

	nvrtcLib, err := open(nvrtcNames)
	if err != nil {
		_ = purego.Dlclose(cudaLib)
		return nil, fmt.Errorf("%w: NVRTC is needed to compile kernels: %v (install the CUDA toolkit's NVRTC, e.g. cuda-nvrtc-12-x, or set %s)",
			ErrNoDriver, err, nvrtcEnv)
	}
	if err := resolve(nvrtcLib, []symbol{
		{&t.NvrtcGetErrorString, "nvrtcGetErrorString"},
		{&t.NvrtcVersion, "nvrtcVersion"},
		{&t.NvrtcCreateProgram, "nvrtcCreateProgram"},
		{&t.NvrtcDestroyProgram, "nvrtcDestroyProgram"},
		{&t.NvrtcCompileProgram, "nvrtcCompileProgram"},
		{&t.NvrtcGetPTXSize, "nvrtcGetPTXSize"},
		{&t.NvrtcGetPTX, "nvrtcGetPTX"},
		{&t.NvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"},
		{&t.NvrtcGetProgramLog, "nvrtcGetProgramLog"},
	}); err != nil {
		_ = purego.Dlclose(nvrtcLib)
		_ = purego.Dlclose(cudaLib)
		return nil, fmt.Errorf("%w: NVRTC is needed to compile kernels: %v", ErrNoDriver, err)
	}
	return t, nil
}

// open dlopens the first of names that loads.
func open(names []string) (uintptr, error) {
	var errs []error
	for _, name := range names {
		h, err := dlopen(name)
		if err == nil {
			return h, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return 0, errors.New("no library names to try")
	}
	return 0, errors.Join(errs...)
}

// dlopen opens the library name. dlerror's message is per thread, and
// purego.Dlopen calls dlopen and dlerror one after the other: the
// goroutine stays on its thread between the two, or the message read may
// be another thread's, usually none (a load that failed, without saying
// why). An error always names the file.
func dlopen(name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	switch {
	case err == nil && h == 0:
		err = fmt.Errorf("%s: dlopen returned no handle", name)
	case err != nil && !strings.Contains(err.Error(), name):
		err = fmt.Errorf("%s: %v", name, err)
	}
	return h, err
}

// resolve registers every symbol of syms from library lib.
func resolve(lib uintptr, syms []symbol) error {
	// On one thread, for dlerror's message (dlopen).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, s := range syms {
		addr, err := purego.Dlsym(lib, s.name)
		if err != nil || addr == 0 {
			return fmt.Errorf("symbol %s missing: %v", s.name, err)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return nil
}
