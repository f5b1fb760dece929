package cuda

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// api is the part of the CUDA driver API and of NVRTC this package uses,
// loaded at run time. CUresult and nvrtcResult are int32; CUdevice is
// int32; CUdeviceptr is uint64; the opaque handles (CUcontext, CUmodule,
// CUfunction, CUstream, CUevent, nvrtcProgram) travel as uintptr and
// size_t as uintptr. The field comments name the C symbols.
type api struct {
	Init               func(flags uint32) int32                                                                                    // cuInit
	DriverGetVersion   func(version *int32) int32                                                                                  // cuDriverGetVersion
	GetErrorName       func(code int32, name **byte) int32                                                                         // cuGetErrorName
	DeviceGetCount     func(count *int32) int32                                                                                    // cuDeviceGetCount
	DeviceGet          func(dev *int32, ordinal int32) int32                                                                       // cuDeviceGet
	DeviceGetName      func(name *byte, n int32, dev int32) int32                                                                  // cuDeviceGetName
	DeviceGetAttribute func(value *int32, attr int32, dev int32) int32                                                             // cuDeviceGetAttribute
	DeviceTotalMem     func(bytes *uintptr, dev int32) int32                                                                       // cuDeviceTotalMem_v2
	PrimaryCtxRetain   func(ctx *uintptr, dev int32) int32                                                                         // cuDevicePrimaryCtxRetain
	PrimaryCtxRelease  func(dev int32) int32                                                                                       // cuDevicePrimaryCtxRelease_v2
	CtxPushCurrent     func(ctx uintptr) int32                                                                                     // cuCtxPushCurrent_v2
	CtxPopCurrent      func(ctx *uintptr) int32                                                                                    // cuCtxPopCurrent_v2
	CtxSynchronize     func() int32                                                                                                // cuCtxSynchronize
	MemGetInfo         func(free, total *uintptr) int32                                                                            // cuMemGetInfo_v2
	MemAlloc           func(dptr *uint64, size uintptr) int32                                                                      // cuMemAlloc_v2
	MemFree            func(dptr uint64) int32                                                                                     // cuMemFree_v2
	MemHostAlloc       func(p *unsafe.Pointer, size uintptr, flags uint32) int32                                                   // cuMemHostAlloc
	MemFreeHost        func(p unsafe.Pointer) int32                                                                                // cuMemFreeHost
	MemcpyHtoDAsync    func(dst uint64, src unsafe.Pointer, n, stream uintptr) int32                                               // cuMemcpyHtoDAsync_v2
	MemcpyDtoHAsync    func(dst unsafe.Pointer, src uint64, n, stream uintptr) int32                                               // cuMemcpyDtoHAsync_v2
	MemsetD8Async      func(dst uint64, value uint8, n, stream uintptr) int32                                                      // cuMemsetD8Async
	ModuleLoadData     func(mod *uintptr, image unsafe.Pointer) int32                                                              // cuModuleLoadData
	ModuleUnload       func(mod uintptr) int32                                                                                     // cuModuleUnload
	ModuleGetFunction  func(fn *uintptr, mod uintptr, name string) int32                                                           // cuModuleGetFunction
	LaunchKernel       func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32 // cuLaunchKernel
	StreamCreate       func(stream *uintptr, flags uint32) int32                                                                   // cuStreamCreate
	StreamDestroy      func(stream uintptr) int32                                                                                  // cuStreamDestroy_v2
	StreamSynchronize  func(stream uintptr) int32                                                                                  // cuStreamSynchronize
	EventCreate        func(event *uintptr, flags uint32) int32                                                                    // cuEventCreate
	EventRecord        func(event, stream uintptr) int32                                                                           // cuEventRecord
	EventSynchronize   func(event uintptr) int32                                                                                   // cuEventSynchronize
	EventElapsedTime   func(ms *float32, start, end uintptr) int32                                                                 // cuEventElapsedTime
	EventDestroy       func(event uintptr) int32                                                                                   // cuEventDestroy_v2

	NvrtcGetErrorString    func(result int32) string                                                                 // nvrtcGetErrorString
	NvrtcVersion           func(major, minor *int32) int32                                                           // nvrtcVersion
	NvrtcCreateProgram     func(prog *uintptr, src, name *byte, nheaders int32, headers, names unsafe.Pointer) int32 // nvrtcCreateProgram
	NvrtcDestroyProgram    func(prog *uintptr) int32                                                                 // nvrtcDestroyProgram
	NvrtcCompileProgram    func(prog uintptr, nopts int32, opts **byte) int32                                        // nvrtcCompileProgram
	NvrtcGetPTXSize        func(prog uintptr, size *uintptr) int32                                                   // nvrtcGetPTXSize
	NvrtcGetPTX            func(prog uintptr, ptx *byte) int32                                                       // nvrtcGetPTX
	NvrtcGetProgramLogSize func(prog uintptr, size *uintptr) int32                                                   // nvrtcGetProgramLogSize
	NvrtcGetProgramLog     func(prog uintptr, log *byte) int32                                                       // nvrtcGetProgramLog
}

// cu is the loaded API; its functions are set only after a successful
// loadFrom.
var cu api

// cudaLibNames are tried in order for the driver: its soname, then the
// development link. The environment variable cudaEnv replaces them.
var cudaLibNames = []string{"libcuda.so.1", "libcuda.so"}

// nvrtcLibNames are tried in order for NVRTC, after the file named by
// nvrtcEnv if that is set. The toolkit's usual lib64 directory is tried
// last, for installations that are not on the loader's search path.
var nvrtcLibNames = []string{
	"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
	"/usr/local/cuda/lib64/libnvrtc.so",
}

const (
	cudaEnv  = "SPARSETUNE_CUDA_LIB"
	nvrtcEnv = "SPARSETUNE_NVRTC_LIB"
)

var loaded struct {
	once sync.Once
	err  error
}

// ErrNoDriver is returned, wrapped, when the CUDA driver or NVRTC cannot be
// loaded, lacks an entry point this package needs, or cuInit fails (for
// example because there is no GPU).
var ErrNoDriver = errors.New("cuda: no CUDA driver")

// Load loads the CUDA driver and NVRTC once and initializes the driver;
// later calls return the first result. A missing library or symbol is an
// error wrapping [ErrNoDriver], never a panic. The driver library is
// libcuda.so.1 (or libcuda.so) unless SPARSETUNE_CUDA_LIB names another
// file; NVRTC is the file named by SPARSETUNE_NVRTC_LIB, else the first of
// libnvrtc.so, libnvrtc.so.13, libnvrtc.so.12 and libnvrtc.so.11.2 that
// loads. Every other function of the package calls Load itself.
func Load() error {
	loaded.once.Do(func() {
		names := cudaLibNames
		if lib := os.Getenv(cudaEnv); lib != "" {
			names = []string{lib}
		}
		nvrtc := nvrtcLibNames
		if lib := os.Getenv(nvrtcEnv); lib != "" {
			nvrtc = append([]string{lib}, nvrtc...)
		}
		t, err := loadFrom(names, nvrtc)
		if err != nil {
			loaded.err = err
			return
		}
		cu = *t
		if err := check(cu.Init(0), "cuInit"); err != nil {
			loaded.err = fmt.Errorf("%w: %w", ErrNoDriver, err)
		}
	})
	return loaded.err
}

// DriverVersion returns the CUDA version the installed driver supports,
// such as "12.4" (cuDriverGetVersion).
func DriverVersion() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	var v int32
	if err := check(cu.DriverGetVersion(&v), "cuDriverGetVersion"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
}

// NVRTCVersion returns the version of the loaded NVRTC, such as "12.4".
func NVRTCVersion() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	var major, minor int32
	if err := checkNVRTC(cu.NvrtcVersion(&major, &minor), "nvrtcVersion"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", major, minor), nil
}

// cString returns the bytes of b up to its first NUL as a string.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// goString copies the NUL-terminated C string at p.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// CUDA constants used here (values from cuda.h).
const (
	attrClockRate      = 13 // CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz
	attrMultiprocessor = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrCCMajor        = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrCCMinor        = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

	streamNonBlocking = 1 // CU_STREAM_NON_BLOCKING
	eventDefault      = 0 // CU_EVENT_DEFAULT: timing enabled
)
