// Package sysmem says how much memory the process can still allocate.
//
// Go cannot recover from a failed allocation: the runtime ends the process
// with "fatal error: runtime: out of memory". Code that sizes a dense
// matrix by a tensor's dims (a factor of a mode with 2^31 indices is 128
// GiB at rank 16) must therefore check the size before it allocates, and
// turn what would be a crash into an error that says what did not fit.
package sysmem
