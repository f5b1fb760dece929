package opencl

import (
	"bytes"
	"fmt"
	"strings"
	"unsafe"
)

// Platform is an installed OpenCL driver (an ICD).
type Platform struct {
	Name    string
	Vendor  string
	Version string // CL_PLATFORM_VERSION, e.g. "OpenCL 3.0 PoCL 3.1 ..."
	id      uintptr
}

// DeviceType is a CL_DEVICE_TYPE bit set.
type DeviceType uint64

// Device type bits.
const (
	TypeDefault     DeviceType = 1 << 0
	TypeCPU         DeviceType = 1 << 1
	TypeGPU         DeviceType = 1 << 2
	TypeAccelerator DeviceType = 1 << 3
	TypeCustom      DeviceType = 1 << 4
)

// String names the set bits, e.g. "CPU" or "GPU|DEFAULT".
func (t DeviceType) String() string {
	var parts []string
	for _, b := range []struct {
		bit  DeviceType
		name string
	}{{TypeCPU, "CPU"}, {TypeGPU, "GPU"}, {TypeAccelerator, "ACCELERATOR"}, {TypeCustom, "CUSTOM"}, {TypeDefault, "DEFAULT"}} {
		if t&b.bit != 0 {
			parts = append(parts, b.name)
			t &^= b.bit
		}
	}
	if t != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint64(t)))
	}
	if len(parts) == 0 {
		return "NONE"
	}
	return strings.Join(parts, "|")
}

// Device is one OpenCL device and the properties read from it when it was
// listed. Pass it to [NewContext].
type Device struct {
	Platform         string     // the platform's name
	Name             string     // CL_DEVICE_NAME
	Vendor           string     // CL_DEVICE_VENDOR
	DriverVersion    string     // CL_DRIVER_VERSION
	Version          string     // CL_DEVICE_VERSION, "OpenCL <major>.<minor> <vendor info>"
	CVersion         string     // CL_DEVICE_OPENCL_C_VERSION, may be empty on 1.0 devices
	Type             DeviceType // CL_DEVICE_TYPE
	ComputeUnits     int        // CL_DEVICE_MAX_COMPUTE_UNITS
	MaxClockMHz      int        // CL_DEVICE_MAX_CLOCK_FREQUENCY
	GlobalMemBytes   int64      // CL_DEVICE_GLOBAL_MEM_SIZE
	MaxAllocBytes    int64      // CL_DEVICE_MAX_MEM_ALLOC_SIZE
	LocalMemBytes    int64      // CL_DEVICE_LOCAL_MEM_SIZE
	MaxWorkGroupSize int        // CL_DEVICE_MAX_WORK_GROUP_SIZE
	id               uintptr
	platform         uintptr
}

func (d Device) String() string {
	return fmt.Sprintf("%s (%s, %s, %s, %d CUs @ %d MHz, %d MiB)",
		d.Name, d.Type, d.Vendor, d.Version, d.ComputeUnits, d.MaxClockMHz, d.GlobalMemBytes>>20)
}

// Platforms lists the installed OpenCL platforms. It loads the runtime
// first; with no library the error wraps [ErrNoRuntime]. A loader with no
// driver installed gives an empty list and no error.
func Platforms() ([]Platform, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	ids, err := platformIDs()
	if err != nil {
		return nil, err
	}
	ps := make([]Platform, 0, len(ids))
	for _, id := range ids {
		p := Platform{id: id}
		if p.Name, err = platformString(id, platformName); err != nil {
			return nil, err
		}
		if p.Vendor, err = platformString(id, platformVendor); err != nil {
			return nil, err
		}
		if p.Version, err = platformString(id, platformVersion); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Devices lists the platform's devices of every type.
func (p Platform) Devices() ([]Device, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	ids, err := deviceIDs(p.id)
	if err != nil {
		return nil, fmt.Errorf("platform %q: %w", p.Name, err)
	}
	ds := make([]Device, 0, len(ids))
	for _, id := range ids {
		d, err := deviceInfo(id)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p.Name, err)
		}
		d.Platform, d.platform = p.Name, p.id
		ds = append(ds, d)
	}
	return ds, nil
}

// Devices lists the devices of every platform, platform by platform.
func Devices() ([]Device, error) {
	ps, err := Platforms()
	if err != nil {
		return nil, err
	}
	var all []Device
	for _, p := range ps {
		ds, err := p.Devices()
		if err != nil {
			return nil, err
		}
		all = append(all, ds...)
	}
	return all, nil
}

// platformIDs returns the platform handles.
func platformIDs() ([]uintptr, error) {
	var n uint32
	code := cl.GetPlatformIDs(0, nil, &n)
	if Code(code) == ErrPlatformNotFoundKHR {
		return nil, nil // the ICD loader found no installed driver
	}
	if err := check(code, "clGetPlatformIDs"); err != nil || n == 0 {
		return nil, err
	}
	ids := make([]uintptr, n)
	if err := check(cl.GetPlatformIDs(n, &ids[0], &n), "clGetPlatformIDs"); err != nil {
		return nil, err
	}
	return ids[:min(int(n), len(ids))], nil
}

// deviceIDs returns a platform's device handles.
func deviceIDs(p uintptr) ([]uintptr, error) {
	var n uint32
	code := cl.GetDeviceIDs(p, deviceTypeAll, 0, nil, &n)
	if Code(code) == ErrDeviceNotFound {
		return nil, nil
	}
	if err := check(code, "clGetDeviceIDs"); err != nil || n == 0 {
		return nil, err
	}
	ids := make([]uintptr, n)
	if err := check(cl.GetDeviceIDs(p, deviceTypeAll, n, &ids[0], &n), "clGetDeviceIDs"); err != nil {
		return nil, err
	}
	return ids[:min(int(n), len(ids))], nil
}

func deviceInfo(id uintptr) (Device, error) {
	d := Device{id: id}
	var err error
	str := func(dst *string, param uint32) {
		if err == nil {
			*dst, err = deviceString(id, param)
		}
	}
	str(&d.Name, deviceName)
	str(&d.Vendor, deviceVendor)
	str(&d.DriverVersion, driverVersion)
	str(&d.Version, deviceVersion)
	if err != nil {
		return d, err
	}
	// CL_DEVICE_OPENCL_C_VERSION is 1.1+; a 1.0 device rejects it.
	d.CVersion, _ = deviceString(id, deviceCVersion)

	typ, err := deviceUint[uint64](id, deviceTypeInfo)
	if err != nil {
		return d, err
	}
	d.Type = DeviceType(typ)
	cu, err := deviceUint[uint32](id, deviceMaxComputeUnits)
	if err != nil {
		return d, err
	}
	d.ComputeUnits = int(cu)
	clk, err := deviceUint[uint32](id, deviceMaxClock)
	if err != nil {
		return d, err
	}
	d.MaxClockMHz = int(clk)
	for _, q := range []struct {
		dst   *int64
		param uint32
	}{{&d.GlobalMemBytes, deviceGlobalMem}, {&d.MaxAllocBytes, deviceMaxAlloc}, {&d.LocalMemBytes, deviceLocalMem}} {
		v, err := deviceUint[uint64](id, q.param)
		if err != nil {
			return d, err
		}
		*q.dst = int64(min(v, 1<<62))
	}
	wg, err := deviceUint[uintptr](id, deviceMaxWGSize)
	if err != nil {
		return d, err
	}
	d.MaxWorkGroupSize = int(wg)
	return d, nil
}

// infoString reads a string property through get.
func infoString(get func(size uintptr, value unsafe.Pointer, ret *uintptr) int32, op string) (string, error) {
	var size uintptr
	if err := check(get(0, nil, &size), op); err != nil {
		return "", err
	}
	if size == 0 {
		return "", nil
	}
	buf := make([]byte, size)
	if err := check(get(size, unsafe.Pointer(&buf[0]), nil), op); err != nil {
		return "", err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return strings.TrimSpace(string(buf)), nil
}

func platformString(p uintptr, param uint32) (string, error) {
	return infoString(func(size uintptr, value unsafe.Pointer, ret *uintptr) int32 {
		return cl.GetPlatformInfo(p, param, size, value, ret)
	}, "clGetPlatformInfo")
}

func deviceString(d uintptr, param uint32) (string, error) {
	return infoString(func(size uintptr, value unsafe.Pointer, ret *uintptr) int32 {
		return cl.GetDeviceInfo(d, param, size, value, ret)
	}, "clGetDeviceInfo")
}

// deviceUint reads a cl_uint (T uint32), cl_ulong or cl_bitfield (uint64)
// or size_t (uintptr) property. T must match the property's C type: a
// smaller T is rejected by the driver with CL_INVALID_VALUE.
func deviceUint[T uint32 | uint64 | uintptr](d uintptr, param uint32) (T, error) {
	var v T
	err := check(cl.GetDeviceInfo(d, param, unsafe.Sizeof(v), unsafe.Pointer(&v), nil), "clGetDeviceInfo")
	return v, err
}
