package hetero

import (
	"fmt"
	"strings"
)

// Lookup returns the device with the CLI name: "cpu" (running kernels on
// threads goroutines, 0 for GOMAXPROCS), or an accelerator named by its
// backend and index.
func Lookup(name string, threads int) (Device, error) {
	if name == "" || name == "cpu" {
		return NewCPU(threads), nil
	}
	backend, _, ok := strings.Cut(name, ":")
	if !ok {
		return nil, fmt.Errorf("unknown device %q, expected cpu or BACKEND:INDEX (opencl:0, cuda:0)", name)
	}
	return nil, fmt.Errorf("device %s: no %s backend in this build", name, backend)
}

// Available returns the CLI names of the devices this build can reach:
// the CPU, then the accelerators its backends discover.
func Available() []string { return []string{"cpu"} }
