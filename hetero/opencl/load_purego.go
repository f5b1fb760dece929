//go:build (linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64))

package opencl

import (
	"fmt"

	"github.com/sparsetune/sparsetune/internal/dynlib"
)

// runtimeLoading says whether loadFrom can load a library on this platform.
const runtimeLoading = true

// loadFrom opens the first library in names that loads and resolves every
// entry point of api from it.
func loadFrom(names []string) (*api, error) {
	lib, err := dynlib.Open(names)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (install an OpenCL ICD loader and a driver, e.g. ocl-icd-libopencl1 and pocl-opencl-icd)",
			ErrNoRuntime, err)
	}
	t := new(api)
	syms := []dynlib.Symbol{
		{Fn: &t.GetPlatformIDs, Name: "clGetPlatformIDs"},
		{Fn: &t.GetPlatformInfo, Name: "clGetPlatformInfo"},
		{Fn: &t.GetDeviceIDs, Name: "clGetDeviceIDs"},
		{Fn: &t.GetDeviceInfo, Name: "clGetDeviceInfo"},
		{Fn: &t.CreateContext, Name: "clCreateContext"},
		{Fn: &t.ReleaseContext, Name: "clReleaseContext"},
		{Fn: &t.CreateCommandQueue, Name: "clCreateCommandQueue"},
		{Fn: &t.ReleaseCommandQueue, Name: "clReleaseCommandQueue"},
		{Fn: &t.CreateBuffer, Name: "clCreateBuffer"},
		{Fn: &t.ReleaseMemObject, Name: "clReleaseMemObject"},
		{Fn: &t.CreateProgramWithSrc, Name: "clCreateProgramWithSource"},
		{Fn: &t.BuildProgram, Name: "clBuildProgram"},
		{Fn: &t.GetProgramBuildInfo, Name: "clGetProgramBuildInfo"},
		{Fn: &t.ReleaseProgram, Name: "clReleaseProgram"},
		{Fn: &t.CreateKernel, Name: "clCreateKernel"},
		{Fn: &t.ReleaseKernel, Name: "clReleaseKernel"},
		{Fn: &t.SetKernelArg, Name: "clSetKernelArg"},
		{Fn: &t.GetKernelWorkGroupInfo, Name: "clGetKernelWorkGroupInfo"},
		{Fn: &t.EnqueueNDRangeKernel, Name: "clEnqueueNDRangeKernel"},
		{Fn: &t.EnqueueWriteBuffer, Name: "clEnqueueWriteBuffer"},
		{Fn: &t.EnqueueReadBuffer, Name: "clEnqueueReadBuffer"},
		{Fn: &t.EnqueueFillBuffer, Name: "clEnqueueFillBuffer"},
		{Fn: &t.Finish, Name: "clFinish"},
		{Fn: &t.Flush, Name: "clFlush"},
		{Fn: &t.WaitForEvents, Name: "clWaitForEvents"},
		{Fn: &t.GetEventProfilingInfo, Name: "clGetEventProfilingInfo"},
		{Fn: &t.ReleaseEvent, Name: "clReleaseEvent"},
	}
	if err := dynlib.Resolve(lib, syms); err != nil {
		dynlib.Close(lib)
		return nil, fmt.Errorf("%w: %v", ErrNoRuntime, err)
	}
	return t, nil
}
