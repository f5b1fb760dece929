package opencl

import (
	"errors"
	"fmt"
)

// Code is an OpenCL status code (cl_int). As an error it prints its CL
// name, so an [*Error] can be tested with errors.Is(err, ErrOutOfResources).
type Code int32

// The standard OpenCL error codes (-1..-19, -30..-72) and the two KHR
// codes the ICD loader returns.
const (
	ErrDeviceNotFound                     Code = -1    // CL_DEVICE_NOT_FOUND
	ErrDeviceNotAvailable                 Code = -2    // CL_DEVICE_NOT_AVAILABLE
	ErrCompilerNotAvailable               Code = -3    // CL_COMPILER_NOT_AVAILABLE
	ErrMemObjectAllocationFailure         Code = -4    // CL_MEM_OBJECT_ALLOCATION_FAILURE
	ErrOutOfResources                     Code = -5    // CL_OUT_OF_RESOURCES
	ErrOutOfHostMemory                    Code = -6    // CL_OUT_OF_HOST_MEMORY
	ErrProfilingInfoNotAvailable          Code = -7    // CL_PROFILING_INFO_NOT_AVAILABLE
	ErrMemCopyOverlap                     Code = -8    // CL_MEM_COPY_OVERLAP
	ErrImageFormatMismatch                Code = -9    // CL_IMAGE_FORMAT_MISMATCH
	ErrImageFormatNotSupported            Code = -10   // CL_IMAGE_FORMAT_NOT_SUPPORTED
	ErrBuildProgramFailure                Code = -11   // CL_BUILD_PROGRAM_FAILURE
	ErrMapFailure                         Code = -12   // CL_MAP_FAILURE
	ErrMisalignedSubBufferOffset          Code = -13   // CL_MISALIGNED_SUB_BUFFER_OFFSET
	ErrExecStatusErrorForEventsInWaitList Code = -14   // CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
	ErrCompileProgramFailure              Code = -15   // CL_COMPILE_PROGRAM_FAILURE
	ErrLinkerNotAvailable                 Code = -16   // CL_LINKER_NOT_AVAILABLE
	ErrLinkProgramFailure                 Code = -17   // CL_LINK_PROGRAM_FAILURE
	ErrDevicePartitionFailed              Code = -18   // CL_DEVICE_PARTITION_FAILED
	ErrKernelArgInfoNotAvailable          Code = -19   // CL_KERNEL_ARG_INFO_NOT_AVAILABLE
	ErrInvalidValue                       Code = -30   // CL_INVALID_VALUE
	ErrInvalidDeviceType                  Code = -31   // CL_INVALID_DEVICE_TYPE
	ErrInvalidPlatform                    Code = -32   // CL_INVALID_PLATFORM
	ErrInvalidDevice                      Code = -33   // CL_INVALID_DEVICE
	ErrInvalidContext                     Code = -34   // CL_INVALID_CONTEXT
	ErrInvalidQueueProperties             Code = -35   // CL_INVALID_QUEUE_PROPERTIES
	ErrInvalidCommandQueue                Code = -36   // CL_INVALID_COMMAND_QUEUE
	ErrInvalidHostPtr                     Code = -37   // CL_INVALID_HOST_PTR
	ErrInvalidMemObject                   Code = -38   // CL_INVALID_MEM_OBJECT
	ErrInvalidImageFormatDescriptor       Code = -39   // CL_INVALID_IMAGE_FORMAT_DESCRIPTOR
	ErrInvalidImageSize                   Code = -40   // CL_INVALID_IMAGE_SIZE
	ErrInvalidSampler                     Code = -41   // CL_INVALID_SAMPLER
	ErrInvalidBinary                      Code = -42   // CL_INVALID_BINARY
	ErrInvalidBuildOptions                Code = -43   // CL_INVALID_BUILD_OPTIONS
	ErrInvalidProgram                     Code = -44   // CL_INVALID_PROGRAM
	ErrInvalidProgramExecutable           Code = -45   // CL_INVALID_PROGRAM_EXECUTABLE
	ErrInvalidKernelName                  Code = -46   // CL_INVALID_KERNEL_NAME
	ErrInvalidKernelDefinition            Code = -47   // CL_INVALID_KERNEL_DEFINITION
	ErrInvalidKernel                      Code = -48   // CL_INVALID_KERNEL
	ErrInvalidArgIndex                    Code = -49   // CL_INVALID_ARG_INDEX
	ErrInvalidArgValue                    Code = -50   // CL_INVALID_ARG_VALUE
	ErrInvalidArgSize                     Code = -51   // CL_INVALID_ARG_SIZE
	ErrInvalidKernelArgs                  Code = -52   // CL_INVALID_KERNEL_ARGS
	ErrInvalidWorkDimension               Code = -53   // CL_INVALID_WORK_DIMENSION
	ErrInvalidWorkGroupSize               Code = -54   // CL_INVALID_WORK_GROUP_SIZE
	ErrInvalidWorkItemSize                Code = -55   // CL_INVALID_WORK_ITEM_SIZE
	ErrInvalidGlobalOffset                Code = -56   // CL_INVALID_GLOBAL_OFFSET
	ErrInvalidEventWaitList               Code = -57   // CL_INVALID_EVENT_WAIT_LIST
	ErrInvalidEvent                       Code = -58   // CL_INVALID_EVENT
	ErrInvalidOperation                   Code = -59   // CL_INVALID_OPERATION
	ErrInvalidGLObject                    Code = -60   // CL_INVALID_GL_OBJECT
	ErrInvalidBufferSize                  Code = -61   // CL_INVALID_BUFFER_SIZE
	ErrInvalidMipLevel                    Code = -62   // CL_INVALID_MIP_LEVEL
	ErrInvalidGlobalWorkSize              Code = -63   // CL_INVALID_GLOBAL_WORK_SIZE
	ErrInvalidProperty                    Code = -64   // CL_INVALID_PROPERTY
	ErrInvalidImageDescriptor             Code = -65   // CL_INVALID_IMAGE_DESCRIPTOR
	ErrInvalidCompilerOptions             Code = -66   // CL_INVALID_COMPILER_OPTIONS
	ErrInvalidLinkerOptions               Code = -67   // CL_INVALID_LINKER_OPTIONS
	ErrInvalidDevicePartitionCount        Code = -68   // CL_INVALID_DEVICE_PARTITION_COUNT
	ErrInvalidPipeSize                    Code = -69   // CL_INVALID_PIPE_SIZE
	ErrInvalidDeviceQueue                 Code = -70   // CL_INVALID_DEVICE_QUEUE
	ErrInvalidSpecID                      Code = -71   // CL_INVALID_SPEC_ID
	ErrMaxSizeRestrictionExceeded         Code = -72   // CL_MAX_SIZE_RESTRICTION_EXCEEDED
	ErrInvalidGLSharegroupReferenceKHR    Code = -1000 // CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR
	ErrPlatformNotFoundKHR                Code = -1001 // CL_PLATFORM_NOT_FOUND_KHR
)

// codeNames maps each known code to its name in cl.h.
var codeNames = map[Code]string{
	0:                                     "CL_SUCCESS",
	ErrDeviceNotFound:                     "CL_DEVICE_NOT_FOUND",
	ErrDeviceNotAvailable:                 "CL_DEVICE_NOT_AVAILABLE",
	ErrCompilerNotAvailable:               "CL_COMPILER_NOT_AVAILABLE",
	ErrMemObjectAllocationFailure:         "CL_MEM_OBJECT_ALLOCATION_FAILURE",
	ErrOutOfResources:                     "CL_OUT_OF_RESOURCES",
	ErrOutOfHostMemory:                    "CL_OUT_OF_HOST_MEMORY",
	ErrProfilingInfoNotAvailable:          "CL_PROFILING_INFO_NOT_AVAILABLE",
	ErrMemCopyOverlap:                     "CL_MEM_COPY_OVERLAP",
	ErrImageFormatMismatch:                "CL_IMAGE_FORMAT_MISMATCH",
	ErrImageFormatNotSupported:            "CL_IMAGE_FORMAT_NOT_SUPPORTED",
	ErrBuildProgramFailure:                "CL_BUILD_PROGRAM_FAILURE",
	ErrMapFailure:                         "CL_MAP_FAILURE",
	ErrMisalignedSubBufferOffset:          "CL_MISALIGNED_SUB_BUFFER_OFFSET",
	ErrExecStatusErrorForEventsInWaitList: "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST",
	ErrCompileProgramFailure:              "CL_COMPILE_PROGRAM_FAILURE",
	ErrLinkerNotAvailable:                 "CL_LINKER_NOT_AVAILABLE",
	ErrLinkProgramFailure:                 "CL_LINK_PROGRAM_FAILURE",
	ErrDevicePartitionFailed:              "CL_DEVICE_PARTITION_FAILED",
	ErrKernelArgInfoNotAvailable:          "CL_KERNEL_ARG_INFO_NOT_AVAILABLE",
	ErrInvalidValue:                       "CL_INVALID_VALUE",
	ErrInvalidDeviceType:                  "CL_INVALID_DEVICE_TYPE",
	ErrInvalidPlatform:                    "CL_INVALID_PLATFORM",
	ErrInvalidDevice:                      "CL_INVALID_DEVICE",
	ErrInvalidContext:                     "CL_INVALID_CONTEXT",
	ErrInvalidQueueProperties:             "CL_INVALID_QUEUE_PROPERTIES",
	ErrInvalidCommandQueue:                "CL_INVALID_COMMAND_QUEUE",
	ErrInvalidHostPtr:                     "CL_INVALID_HOST_PTR",
	ErrInvalidMemObject:                   "CL_INVALID_MEM_OBJECT",
	ErrInvalidImageFormatDescriptor:       "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR",
	ErrInvalidImageSize:                   "CL_INVALID_IMAGE_SIZE",
	ErrInvalidSampler:                     "CL_INVALID_SAMPLER",
	ErrInvalidBinary:                      "CL_INVALID_BINARY",
	ErrInvalidBuildOptions:                "CL_INVALID_BUILD_OPTIONS",
	ErrInvalidProgram:                     "CL_INVALID_PROGRAM",
	ErrInvalidProgramExecutable:           "CL_INVALID_PROGRAM_EXECUTABLE",
	ErrInvalidKernelName:                  "CL_INVALID_KERNEL_NAME",
	ErrInvalidKernelDefinition:            "CL_INVALID_KERNEL_DEFINITION",
	ErrInvalidKernel:                      "CL_INVALID_KERNEL",
	ErrInvalidArgIndex:                    "CL_INVALID_ARG_INDEX",
	ErrInvalidArgValue:                    "CL_INVALID_ARG_VALUE",
	ErrInvalidArgSize:                     "CL_INVALID_ARG_SIZE",
	ErrInvalidKernelArgs:                  "CL_INVALID_KERNEL_ARGS",
	ErrInvalidWorkDimension:               "CL_INVALID_WORK_DIMENSION",
	ErrInvalidWorkGroupSize:               "CL_INVALID_WORK_GROUP_SIZE",
	ErrInvalidWorkItemSize:                "CL_INVALID_WORK_ITEM_SIZE",
	ErrInvalidGlobalOffset:                "CL_INVALID_GLOBAL_OFFSET",
	ErrInvalidEventWaitList:               "CL_INVALID_EVENT_WAIT_LIST",
	ErrInvalidEvent:                       "CL_INVALID_EVENT",
	ErrInvalidOperation:                   "CL_INVALID_OPERATION",
	ErrInvalidGLObject:                    "CL_INVALID_GL_OBJECT",
	ErrInvalidBufferSize:                  "CL_INVALID_BUFFER_SIZE",
	ErrInvalidMipLevel:                    "CL_INVALID_MIP_LEVEL",
	ErrInvalidGlobalWorkSize:              "CL_INVALID_GLOBAL_WORK_SIZE",
	ErrInvalidProperty:                    "CL_INVALID_PROPERTY",
	ErrInvalidImageDescriptor:             "CL_INVALID_IMAGE_DESCRIPTOR",
	ErrInvalidCompilerOptions:             "CL_INVALID_COMPILER_OPTIONS",
	ErrInvalidLinkerOptions:               "CL_INVALID_LINKER_OPTIONS",
	ErrInvalidDevicePartitionCount:        "CL_INVALID_DEVICE_PARTITION_COUNT",
	ErrInvalidPipeSize:                    "CL_INVALID_PIPE_SIZE",
	ErrInvalidDeviceQueue:                 "CL_INVALID_DEVICE_QUEUE",
	ErrInvalidSpecID:                      "CL_INVALID_SPEC_ID",
	ErrMaxSizeRestrictionExceeded:         "CL_MAX_SIZE_RESTRICTION_EXCEEDED",
	ErrInvalidGLSharegroupReferenceKHR:    "CL_INVALID_GL_SHAREGROUP_REFERENCE_KHR",
	ErrPlatformNotFoundKHR:                "CL_PLATFORM_NOT_FOUND_KHR",
}

// String returns the code's CL name, such as "CL_INVALID_VALUE", or
// "CL_UNKNOWN_ERROR_<n>" for a code outside the standard set.
func (c Code) String() string {
	if name, ok := codeNames[c]; ok {
		return name
	}
	return fmt.Sprintf("CL_UNKNOWN_ERROR_%d", int32(c))
}

// Error implements error.
func (c Code) Error() string { return c.String() }

// Error is a failed OpenCL call: the API function and the status it
// returned. It unwraps to its [Code].
type Error struct {
	Op   string // the API call that failed, e.g. "clCreateBuffer"
	Code Code
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.Op, e.Code, int32(e.Code))
}

// Unwrap returns the status code.
func (e *Error) Unwrap() error { return e.Code }

// check turns a status into an error.
func check(code int32, op string) error {
	if code == 0 {
		return nil
	}
	return &Error{Op: op, Code: Code(code)}
}

// ErrClosed is returned by calls on a closed [Context] or on an object
// whose Context was closed; ErrReleased by calls on a released object.
var (
	ErrClosed   = errors.New("opencl: context closed")
	ErrReleased = errors.New("opencl: object released")
)
