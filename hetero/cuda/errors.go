package cuda

import (
	"errors"
	"fmt"
)

// Error is a failed CUDA driver or NVRTC call: the API function, the
// CUresult or nvrtcResult it returned and that result's name.
type Error struct {
	Code int32  // the CUresult or nvrtcResult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY" or "NVRTC_ERROR_COMPILATION"
	Op   string // the API call that failed, e.g. "cuMemAlloc_v2"
}

// Error returns "Op: Name", e.g. "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY".
func (e *Error) Error() string { return e.Op + ": " + e.Name }

// Some CUresult values callers may want to test Error.Code against.
const (
	ResultOutOfMemory           int32 = 2   // CUDA_ERROR_OUT_OF_MEMORY
	ResultNoDevice              int32 = 100 // CUDA_ERROR_NO_DEVICE
	ResultUnsupportedPTXVersion int32 = 222 // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
	ResultNotFound              int32 = 500 // CUDA_ERROR_NOT_FOUND
	ResultNotReady              int32 = 600 // CUDA_ERROR_NOT_READY
	ResultIllegalAddress        int32 = 700 // CUDA_ERROR_ILLEGAL_ADDRESS
	ResultLaunchFailed          int32 = 719 // CUDA_ERROR_LAUNCH_FAILED
)

// resultNames names the common CUresult values (cuda.h), for when
// cuGetErrorName is unavailable or does not know a code.
var resultNames = map[int32]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	214: "CUDA_ERROR_ECC_UNCORRECTABLE",
	218: "CUDA_ERROR_INVALID_PTX",
	221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	300: "CUDA_ERROR_INVALID_SOURCE",
	301: "CUDA_ERROR_FILE_NOT_FOUND",
	400: "CUDA_ERROR_INVALID_HANDLE",
	401: "CUDA_ERROR_ILLEGAL_STATE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	710: "CUDA_ERROR_ASSERT",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716: "CUDA_ERROR_MISALIGNED_ADDRESS",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	800: "CUDA_ERROR_NOT_PERMITTED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	999: "CUDA_ERROR_UNKNOWN",
}

// nvrtcNames names the nvrtcResult values (nvrtc.h), for when
// nvrtcGetErrorString is unavailable.
var nvrtcNames = map[int32]string{
	0:  "NVRTC_SUCCESS",
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
}

// resultName names a CUresult: by cuGetErrorName once the driver is
// loaded, else (or if the driver does not know it) from resultNames.
func resultName(code int32) string {
	if cu.GetErrorName != nil {
		var p *byte
		if cu.GetErrorName(code, &p) == 0 && p != nil {
			if s := goString(p); s != "" {
				return s
			}
		}
	}
	if s, ok := resultNames[code]; ok {
		return s
	}
	return fmt.Sprintf("CUDA_ERROR_CODE_%d", code)
}

// nvrtcName names an nvrtcResult: by nvrtcGetErrorString once NVRTC is
// loaded, else from nvrtcNames.
func nvrtcName(code int32) string {
	if cu.NvrtcGetErrorString != nil {
		if s := cu.NvrtcGetErrorString(code); s != "" {
			return s
		}
	}
	if s, ok := nvrtcNames[code]; ok {
		return s
	}
	return fmt.Sprintf("NVRTC_ERROR_CODE_%d", code)
}

// check turns a CUresult into an error.
func check(code int32, op string) error {
	if code == 0 {
		return nil
	}
	return &Error{Code: code, Name: resultName(code), Op: op}
}

// checkNVRTC turns an nvrtcResult into an error.
func checkNVRTC(code int32, op string) error {
	if code == 0 {
		return nil
	}
	return &Error{Code: code, Name: nvrtcName(code), Op: op}
}

// ErrClosed is returned by calls on a closed [Context] or on an object
// whose Context was closed; ErrReleased by calls on a freed or released
// object.
var (
	ErrClosed   = errors.New("cuda: context closed")
	ErrReleased = errors.New("cuda: object freed")
)
