//go:build !((linux && (amd64 || arm64 || loong64)) || (darwin && (amd64 || arm64)))

package cuda

import (
	"fmt"
	"runtime"
)

// loadFrom fails on platforms purego cannot load libraries on without cgo;
// the package still compiles there, with no driver.
func loadFrom(cudaNames, nvrtcNames []string) (*api, error) {
	return nil, fmt.Errorf("%w: run-time loading of %v and %v is not supported on %s/%s",
		ErrNoDriver, cudaNames, nvrtcNames, runtime.GOOS, runtime.GOARCH)
}
