//go:build (linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64))

package opencl

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// loadFrom opens the first library in names that loads and resolves every
// entry point of api from it.
func loadFrom(names []string) (*api, error) {
	// dlerror's message is per thread, and purego calls dlopen (dlsym)
	// and dlerror one after the other: the goroutine stays on its thread
	// between the two, or the message read may be another thread's,
	// usually none (a load that failed, without saying why).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var lib uintptr
	var errs []error
	for _, name := range names {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil && h != 0 {
			lib = h
			break
		}
		switch {
		case err == nil:
			err = fmt.Errorf("%s: dlopen returned no handle", name)
		case !strings.Contains(err.Error(), name):
			err = fmt.Errorf("%s: %v", name, err)
		}
		errs = append(errs, err) // an error names the file
	}
	if lib == 0 {
		return nil, fmt.Errorf("%w: %v (install an OpenCL ICD loader and a driver, e.g. ocl-icd-libopencl1 and pocl-opencl-icd)",
			ErrNoRuntime, errors.Join(errs...))
	}
	t := new(api)
	syms := []struct {
		fn   any
		name string
	}{
		{&t.GetPlatformIDs, "clGetPlatformIDs"},
		{&t.GetPlatformInfo, "clGetPlatformInfo"},
		{&t.GetDeviceIDs, "clGetDeviceIDs"},
		{&t.GetDeviceInfo, "clGetDeviceInfo"},
		{&t.CreateContext, "clCreateContext"},
		{&t.ReleaseContext, "clReleaseContext"},
		{&t.CreateCommandQueue, "clCreateCommandQueue"},
		{&t.ReleaseCommandQueue, "clReleaseCommandQueue"},
		{&t.CreateBuffer, "clCreateBuffer"},
		{&t.ReleaseMemObject, "clReleaseMemObject"},
		{&t.CreateProgramWithSrc, "clCreateProgramWithSource"},
		{&t.BuildProgram, "clBuildProgram"},
		{&t.GetProgramBuildInfo, "clGetProgramBuildInfo"},
		{&t.ReleaseProgram, "clReleaseProgram"},
		{&t.CreateKernel, "clCreateKernel"},
		{&t.ReleaseKernel, "clReleaseKernel"},
		{&t.SetKernelArg, "clSetKernelArg"},
		{&t.GetKernelWorkGroupInfo, "clGetKernelWorkGroupInfo"},
		{&t.EnqueueNDRangeKernel, "clEnqueueNDRangeKernel"},
		{&t.EnqueueWriteBuffer, "clEnqueueWriteBuffer"},
		{&t.EnqueueReadBuffer, "clEnqueueReadBuffer"},
		{&t.EnqueueFillBuffer, "clEnqueueFillBuffer"},
		{&t.Finish, "clFinish"},
		{&t.Flush, "clFlush"},
		{&t.WaitForEvents, "clWaitForEvents"},
		{&t.GetEventProfilingInfo, "clGetEventProfilingInfo"},
		{&t.ReleaseEvent, "clReleaseEvent"},
	}
	for _, s := range syms {
		addr, err := purego.Dlsym(lib, s.name)
		if err != nil || addr == 0 {
			_ = purego.Dlclose(lib)
			return nil, fmt.Errorf("%w: symbol %s missing: %v", ErrNoRuntime, s.name, err)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return t, nil
}
