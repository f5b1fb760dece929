package hetero

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/sparsetune/sparsetune/hetero/opencl"
)

// backend is an accelerator API: list finds its devices, or an error when
// the runtime is missing or broken.
type backend struct {
	name string
	list func() ([]accelEntry, error)
}

// accelEntry is a device discovery found: what it is, and how to open it
// for running jobs.
type accelEntry struct {
	info Info
	open func() (*accelDevice, error)
}

// backends are tried in this order by Available and Devices.
var backends = []backend{
	{name: "opencl", list: listOpenCL},
	{name: "cuda", list: listCUDA},
}

// Backend is what discovery found of one accelerator backend.
type Backend struct {
	Name    string `json:"name"`
	Devices []Info `json:"devices,omitempty"`
	// Missing says why the backend has no devices ("" when it has some):
	// the runtime library is absent, or the runtime reports none.
	Missing string `json:"missing,omitempty"`
}

var registry struct {
	mu      sync.Mutex
	found   []Backend // nil until the first discovery
	entries map[string]accelEntry
	opened  map[string]*accelDevice
}

// Backends returns what each accelerator backend found. Discovery runs
// once per process: a missing runtime is not an error, it only leaves the
// backend without devices.
func Backends() []Backend {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return discover()
}

// discover runs discovery once; registry.mu is held.
func discover() []Backend {
	if registry.found != nil {
		return registry.found
	}
	registry.entries = make(map[string]accelEntry)
	for _, b := range backends {
		found := Backend{Name: b.name}
		entries, err := b.list()
		switch {
		case err != nil:
			// One line: joined errors (one per library tried) are
			// separated by newlines.
			found.Missing = strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
		case len(entries) == 0:
			found.Missing = "the runtime reports no devices"
		}
		for _, e := range entries {
			found.Devices = append(found.Devices, e.info)
			registry.entries[e.info.Name] = e
		}
		registry.found = append(registry.found, found)
	}
	return registry.found
}

// Available returns the CLI names of the devices this build can reach:
// the CPU, then the accelerators its backends discover.
func Available() []string {
	names := []string{"cpu"}
	for _, b := range Backends() {
		for _, info := range b.Devices {
			names = append(names, info.Name)
		}
	}
	return names
}

// Lookup returns the device with the CLI name: "cpu", also the device
// the empty name means (running kernels on threads goroutines, 0 for
// GOMAXPROCS), or an accelerator named by its backend and index,
// "opencl:0" or "cuda:0". An accelerator is opened (its
// kernels compiled) on first use and shared by later lookups for the rest
// of the process; threads does not apply to it.
func Lookup(name string, threads int) (Device, error) {
	if name == "" || name == "cpu" {
		return NewCPU(threads), nil
	}
	bname, idx, ok := strings.Cut(name, ":")
	index, err := strconv.Atoi(idx)
	if !ok || err != nil || index < 0 {
		return nil, fmt.Errorf("unknown device %q, expected cpu or BACKEND:INDEX (opencl:0, cuda:0)", name)
	}
	name = bname + ":" + strconv.Itoa(index) // "opencl:00" is opencl:0
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if d := registry.opened[name]; d != nil {
		return d, nil
	}
	found := discover()
	for i, b := range backends {
		if b.name != bname {
			continue
		}
		if found[i].Missing != "" {
			return nil, fmt.Errorf("device %s: %s backend: %s", name, bname, found[i].Missing)
		}
		if index >= len(found[i].Devices) {
			return nil, fmt.Errorf("device %s: %s has %d device(s), %s:0 to %s:%d", name, bname, len(found[i].Devices), bname, bname, len(found[i].Devices)-1)
		}
		d, err := registry.entries[name].open()
		if err != nil {
			return nil, err
		}
		if registry.opened == nil {
			registry.opened = make(map[string]*accelDevice)
		}
		registry.opened[name] = d
		return d, nil
	}
	return nil, fmt.Errorf("device %s: unknown backend %q, expected opencl or cuda", name, bname)
}

func listOpenCL() ([]accelEntry, error) {
	devs, err := opencl.Devices()
	if err != nil {
		return nil, err
	}
	entries := make([]accelEntry, len(devs))
	for i, dev := range devs {
		name := fmt.Sprintf("opencl:%d", i)
		entries[i] = accelEntry{clInfo(name, dev), func() (*accelDevice, error) { return openOpenCL(name, dev) }}
	}
	return entries, nil
}
