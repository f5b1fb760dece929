//go:build !linux

package sysmem

// available is unknown outside Linux: only sizes past the address space
// are refused there.
func available() (uint64, bool) { return 0, false }
