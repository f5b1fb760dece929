//go:build (linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64))

package cuda

import (
	"fmt"

	"github.com/sparsetune/sparsetune/internal/dynlib"
)

// loadFrom opens the first library in cudaNames that loads and the first
// in nvrtcNames that loads, and resolves every entry point of api from
// them.
func loadFrom(cudaNames, nvrtcNames []string) (*api, error) {
	cudaLib, err := dynlib.Open(cudaNames)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (install the NVIDIA driver, which provides libcuda.so.1, or set %s)", ErrNoDriver, err, cudaEnv)
	}
	t := new(api)
	if err := dynlib.Resolve(cudaLib, []dynlib.Symbol{
		{Fn: &t.Init, Name: "cuInit"},
		{Fn: &t.DriverGetVersion, Name: "cuDriverGetVersion"},
		{Fn: &t.GetErrorName, Name: "cuGetErrorName"},
		{Fn: &t.DeviceGetCount, Name: "cuDeviceGetCount"},
		{Fn: &t.DeviceGet, Name: "cuDeviceGet"},
		{Fn: &t.DeviceGetName, Name: "cuDeviceGetName"},
		{Fn: &t.DeviceGetAttribute, Name: "cuDeviceGetAttribute"},
		{Fn: &t.DeviceTotalMem, Name: "cuDeviceTotalMem_v2"},
		{Fn: &t.PrimaryCtxRetain, Name: "cuDevicePrimaryCtxRetain"},
		{Fn: &t.PrimaryCtxRelease, Name: "cuDevicePrimaryCtxRelease_v2"},
		{Fn: &t.CtxPushCurrent, Name: "cuCtxPushCurrent_v2"},
		{Fn: &t.CtxPopCurrent, Name: "cuCtxPopCurrent_v2"},
		{Fn: &t.CtxSynchronize, Name: "cuCtxSynchronize"},
		{Fn: &t.MemGetInfo, Name: "cuMemGetInfo_v2"},
		{Fn: &t.MemAlloc, Name: "cuMemAlloc_v2"},
		{Fn: &t.MemFree, Name: "cuMemFree_v2"},
		{Fn: &t.MemHostAlloc, Name: "cuMemHostAlloc"},
		{Fn: &t.MemFreeHost, Name: "cuMemFreeHost"},
		{Fn: &t.MemcpyHtoDAsync, Name: "cuMemcpyHtoDAsync_v2"},
		{Fn: &t.MemcpyDtoHAsync, Name: "cuMemcpyDtoHAsync_v2"},
		{Fn: &t.MemsetD8Async, Name: "cuMemsetD8Async"},
		{Fn: &t.ModuleLoadData, Name: "cuModuleLoadData"},
		{Fn: &t.ModuleUnload, Name: "cuModuleUnload"},
		{Fn: &t.ModuleGetFunction, Name: "cuModuleGetFunction"},
		{Fn: &t.LaunchKernel, Name: "cuLaunchKernel"},
		{Fn: &t.StreamCreate, Name: "cuStreamCreate"},
		{Fn: &t.StreamDestroy, Name: "cuStreamDestroy_v2"},
		{Fn: &t.StreamSynchronize, Name: "cuStreamSynchronize"},
		{Fn: &t.EventCreate, Name: "cuEventCreate"},
		{Fn: &t.EventRecord, Name: "cuEventRecord"},
		{Fn: &t.EventSynchronize, Name: "cuEventSynchronize"},
		{Fn: &t.EventElapsedTime, Name: "cuEventElapsedTime"},
		{Fn: &t.EventDestroy, Name: "cuEventDestroy_v2"},
	}); err != nil {
		dynlib.Close(cudaLib)
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}

	nvrtcLib, err := dynlib.Open(nvrtcNames)
	if err != nil {
		dynlib.Close(cudaLib)
		return nil, fmt.Errorf("%w: NVRTC is needed to compile kernels: %v (install the CUDA toolkit's NVRTC, e.g. cuda-nvrtc-12-x, or set %s)",
			ErrNoDriver, err, nvrtcEnv)
	}
	if err := dynlib.Resolve(nvrtcLib, []dynlib.Symbol{
		{Fn: &t.NvrtcGetErrorString, Name: "nvrtcGetErrorString"},
		{Fn: &t.NvrtcVersion, Name: "nvrtcVersion"},
		{Fn: &t.NvrtcCreateProgram, Name: "nvrtcCreateProgram"},
		{Fn: &t.NvrtcDestroyProgram, Name: "nvrtcDestroyProgram"},
		{Fn: &t.NvrtcCompileProgram, Name: "nvrtcCompileProgram"},
		{Fn: &t.NvrtcGetPTXSize, Name: "nvrtcGetPTXSize"},
		{Fn: &t.NvrtcGetPTX, Name: "nvrtcGetPTX"},
		{Fn: &t.NvrtcGetProgramLogSize, Name: "nvrtcGetProgramLogSize"},
		{Fn: &t.NvrtcGetProgramLog, Name: "nvrtcGetProgramLog"},
	}); err != nil {
		dynlib.Close(nvrtcLib)
		dynlib.Close(cudaLib)
		return nil, fmt.Errorf("%w: NVRTC is needed to compile kernels: %v", ErrNoDriver, err)
	}
	return t, nil
}
