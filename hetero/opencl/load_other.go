//go:build !((linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64)))

package opencl

import (
	"fmt"
	"runtime"
)

// runtimeLoading says whether loadFrom can load a library on this platform.
const runtimeLoading = false

// loadFrom fails on platforms purego cannot load libraries on without cgo;
// the package still compiles there, with no runtime.
func loadFrom(names []string) (*api, error) {
	return nil, fmt.Errorf("%w: run-time loading of %v is not supported on %s/%s", ErrNoRuntime, names, runtime.GOOS, runtime.GOARCH)
}
