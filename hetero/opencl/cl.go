package opencl

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"unsafe"
)

// api is the part of the OpenCL C API this package uses, loaded from the
// ICD loader at run time. Handles (cl_platform_id, cl_context, cl_mem, ...)
// are opaque pointers and travel as uintptr; size_t is uintptr, cl_int
// int32, cl_uint uint32, cl_bool uint32, cl_bitfield and cl_ulong uint64.
// Notification callbacks are always passed as 0.
type api struct {
	GetPlatformIDs         func(n uint32, platforms *uintptr, count *uint32) int32
	GetPlatformInfo        func(p uintptr, param uint32, size uintptr, value unsafe.Pointer, ret *uintptr) int32
	GetDeviceIDs           func(p uintptr, typ uint64, n uint32, devices *uintptr, count *uint32) int32
	GetDeviceInfo          func(d uintptr, param uint32, size uintptr, value unsafe.Pointer, ret *uintptr) int32
	CreateContext          func(props *uintptr, n uint32, devices *uintptr, notify, user uintptr, err *int32) uintptr
	ReleaseContext         func(c uintptr) int32
	CreateCommandQueue     func(c, d uintptr, props uint64, err *int32) uintptr
	ReleaseCommandQueue    func(q uintptr) int32
	CreateBuffer           func(c uintptr, flags uint64, size uintptr, host unsafe.Pointer, err *int32) uintptr
	ReleaseMemObject       func(m uintptr) int32
	CreateProgramWithSrc   func(c uintptr, n uint32, srcs **byte, lens *uintptr, err *int32) uintptr
	BuildProgram           func(p uintptr, n uint32, devices *uintptr, options string, notify, user uintptr) int32
	GetProgramBuildInfo    func(p, d uintptr, param uint32, size uintptr, value unsafe.Pointer, ret *uintptr) int32
	ReleaseProgram         func(p uintptr) int32
	CreateKernel           func(p uintptr, name string, err *int32) uintptr
	ReleaseKernel          func(k uintptr) int32
	SetKernelArg           func(k uintptr, i uint32, size uintptr, value unsafe.Pointer) int32
	GetKernelWorkGroupInfo func(k, d uintptr, param uint32, size uintptr, value unsafe.Pointer, ret *uintptr) int32
	EnqueueNDRangeKernel   func(q, k uintptr, dim uint32, offset, global, local *uintptr, nwait uint32, wait *uintptr, ev *uintptr) int32
	EnqueueWriteBuffer     func(q, m uintptr, blocking uint32, offset, size uintptr, ptr unsafe.Pointer, nwait uint32, wait *uintptr, ev *uintptr) int32
	EnqueueReadBuffer      func(q, m uintptr, blocking uint32, offset, size uintptr, ptr unsafe.Pointer, nwait uint32, wait *uintptr, ev *uintptr) int32
	EnqueueFillBuffer      func(q, m uintptr, pattern unsafe.Pointer, psize, offset, size uintptr, nwait uint32, wait *uintptr, ev *uintptr) int32
	Finish                 func(q uintptr) int32
	Flush                  func(q uintptr) int32
	WaitForEvents          func(n uint32, evs *uintptr) int32
	GetEventProfilingInfo  func(ev uintptr, param uint32, size uintptr, value unsafe.Pointer, ret *uintptr) int32
	ReleaseEvent           func(ev uintptr) int32
}

// cl is the loaded API; its functions are set only after a successful Load.
var cl api

// libNames are tried in order: the ICD loader's soname, then the
// development link. The environment variable named by libEnv replaces them
// with one name or path.
var libNames = []string{"libOpenCL.so.1", "libOpenCL.so"}

// darwinLib is OpenCL on macOS.
const darwinLib = "/System/Library/Frameworks/OpenCL.framework/OpenCL"

const libEnv = "SPARSETUNE_OPENCL_LIB"

var loaded struct {
	once sync.Once
	err  error
}

// ErrNoRuntime is returned, wrapped, when no OpenCL library can be loaded
// or it lacks an entry point this package needs.
var ErrNoRuntime = errors.New("opencl: no OpenCL runtime")

// Load loads the OpenCL library once; later calls return the first result.
// A missing library or symbol is an error wrapping [ErrNoRuntime], never a
// panic. [Platforms] and [Devices] call Load themselves. The library is
// libOpenCL.so.1 (or libOpenCL.so), unless the environment variable
// SPARSETUNE_OPENCL_LIB names another file.
func Load() error {
	loaded.once.Do(func() {
		names := libNames
		if runtime.GOOS == "darwin" {
			names = append([]string{darwinLib}, names...)
		}
		if lib := os.Getenv(libEnv); lib != "" {
			names = []string{lib}
		}
		t, err := loadFrom(names)
		if err == nil {
			cl = *t
		}
		loaded.err = err
	})
	return loaded.err
}

// OpenCL constants used here (values from the Khronos cl.h).
const (
	clTrue  = 1
	clFalse = 0

	platformVersion = 0x0901
	platformName    = 0x0902
	platformVendor  = 0x0903

	deviceTypeInfo        = 0x1000
	deviceMaxComputeUnits = 0x1002
	deviceMaxWGSize       = 0x1004
	deviceMaxClock        = 0x100C
	deviceMaxAlloc        = 0x1010
	deviceGlobalMem       = 0x101F
	deviceLocalMem        = 0x1023
	deviceName            = 0x102B
	deviceVendor          = 0x102C
	driverVersion         = 0x102D
	deviceVersion         = 0x102F
	deviceCVersion        = 0x103D

	deviceTypeAll = 0xFFFFFFFF

	queueProfilingEnable = 1 << 1

	memReadWrite = 1 << 0

	programBuildLog = 0x1183

	kernelWorkGroupSize = 0x11B0

	profilingStart = 0x1282
	profilingEnd   = 0x1283
)
