// Package opencl is the OpenCL backend's binding to the OpenCL C API.
//
// The binding is loaded at run time: [Load] opens the ICD loader
// libOpenCL.so.1 (falling back to libOpenCL.so) with purego's dlopen and
// resolves the roughly thirty clXxx entry points it needs; the environment
// variable SPARSETUNE_OPENCL_LIB, if set, names the library to open instead.
// No cgo is involved, so the module keeps building with CGO_ENABLED=0,
// cross-compiles without a C toolchain or OpenCL headers, and a machine
// without any OpenCL installation only loses this backend: Load returns an
// error wrapping [ErrNoRuntime] instead of the program failing to start.
//
// The API is deliberately small and single-device:
//
//   - [Platforms] and [Devices] enumerate what the installed drivers expose,
//     with the properties the task mapper needs (compute units, clock,
//     global memory, work-group limits).
//   - [NewContext] opens an OpenCL context on one [Device] with one in-order
//     command queue created with profiling enabled, so every [Event] can
//     report its device time ([Event.Duration]).
//   - [Context.Build] compiles OpenCL C source into a [Program]; a failed
//     build returns a [*BuildError] naming the device and quoting the build
//     log. [Program.Kernel] yields a [Kernel] whose arguments are set with
//     [Kernel.SetArg] and which runs with [Context.Enqueue] or [Context.Run].
//   - [Buffer] is device memory, written and read either as bytes or through
//     the generic helpers ([Write], [Read], [WriteFloat32], [ReadFloat32],
//     ...), blocking or asynchronously with an [Event].
//
// Every object has a Release (or Close) method that may be called more than
// once. The Context remembers every object created through it and
// [Context.Close] releases whatever is still alive, so closing the context
// frees every OpenCL handle this package created for it.
//
// OpenCL status codes come back as [*Error] values that print the CL name
// (for example "CL_OUT_OF_RESOURCES") and unwrap to a [Code], so callers can
// test them with errors.Is(err, opencl.ErrOutOfResources).
package opencl
