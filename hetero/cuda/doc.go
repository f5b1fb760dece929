// Package cuda is the CUDA backend's binding to the NVIDIA CUDA driver API
// and to NVRTC, the run-time CUDA C++ compiler.
//
// The binding is loaded at run time: [Load] opens libcuda.so.1 (falling
// back to libcuda.so) and libnvrtc with purego's dlopen and resolves the
// entry points it needs, then calls cuInit. The environment variable
// SPARSETUNE_CUDA_LIB, if set, names the driver library to open instead;
// SPARSETUNE_NVRTC_LIB names an NVRTC library to try before the usual
// sonames. No cgo is involved, so the module keeps building with
// CGO_ENABLED=0 and without the CUDA toolkit, and a machine without an
// NVIDIA driver only loses this backend: Load returns an error wrapping
// [ErrNoDriver] instead of the program failing to start.
//
// The API is small and single-device:
//
//   - [Devices] lists the GPUs with the properties the task mapper needs
//     (compute capability, SM count, clock, global memory).
//   - [NewContext] retains the device's primary context. Every call that
//     needs the context makes it current on the calling OS thread for the
//     duration of the call, so a [Context] may be used from any goroutine.
//   - [Context.Compile] compiles CUDA C++ source with NVRTC to PTX for the
//     device's compute capability and loads it as a [Module]; a failed
//     compile returns a [*BuildError] quoting the NVRTC log. Kernels are
//     looked up by name with [Module.Function], so declare them
//     extern "C" to keep their names unmangled.
//   - [Buffer] is device memory, [HostBuffer] page-locked host memory.
//   - A [Stream] orders copies ([Stream.CopyToDevice], [Stream.CopyToHost]),
//     fills ([Stream.Zero]) and kernel launches ([Stream.Launch]); [Event]
//     values recorded on it measure device time with [Elapsed].
//
// Copies are asynchronous with respect to the host only when the host side
// is page-locked ([HostBuffer.Bytes]); from or to ordinary Go memory the
// driver stages them, and CopyToHost returns only when the data has
// arrived, so Go memory is never accessed by the device after a call
// returns.
//
// Every object has a Free, Close or Release method that may be called more
// than once. The Context remembers the objects made through it and
// [Context.Close] frees whatever is still alive before releasing the
// primary context.
//
// Failed driver calls come back as [*Error] values that carry the CUresult
// (or nvrtcResult) and its name, for example
// "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY".
package cuda
