// Package dynlib loads shared libraries at run time without cgo, through
// purego, for the CUDA and OpenCL bindings.
//
// It exists so that both bindings share one answer to a trap: dlerror's
// message is per thread, and purego calls dlopen (or dlsym) and then
// dlerror as two calls. A goroutine that moved to another thread between
// them read another thread's message, usually none, and a failed load
// said nothing of why. Open and Resolve keep the goroutine on one thread
// for both, and an error always names the file or symbol.
//
// The package is empty on platforms where purego cannot load libraries
// without cgo; the bindings report no driver there.
package dynlib
