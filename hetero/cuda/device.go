package cuda

import "fmt"

// Device is one CUDA GPU and the properties read from it when it was
// listed. Pass it to [NewContext].
type Device struct {
	Ordinal      int    // the driver's device index
	Name         string // cuDeviceGetName, e.g. "NVIDIA H100 80GB HBM3"
	Major, Minor int    // compute capability, e.g. 9 and 0
	SMs          int    // streaming multiprocessors
	ClockMHz     int    // peak SM clock; 0 if the driver does not report it
	GlobalMemory int64  // bytes of device memory
	handle       int32  // CUdevice
}

// String describes the device, e.g. "cuda:0 NVIDIA H100 (sm_90, 132 SMs)".
func (d Device) String() string {
	return fmt.Sprintf("cuda:%d %s (sm_%d%d, %d SMs)", d.Ordinal, d.Name, d.Major, d.Minor, d.SMs)
}

// Devices lists the CUDA devices the driver exposes.
func Devices() ([]Device, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var n int32
	if err := check(cu.DeviceGetCount(&n), "cuDeviceGetCount"); err != nil {
		return nil, err
	}
	devs := make([]Device, 0, n)
	for i := range n {
		d, err := device(i)
		if err != nil {
			return nil, fmt.Errorf("cuda: device %d: %w", i, err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// device reads the properties of device ordinal i.
func device(i int32) (Device, error) {
	var h int32
	if err := check(cu.DeviceGet(&h, i), "cuDeviceGet"); err != nil {
		return Device{}, err
	}
	var name [256]byte
	if err := check(cu.DeviceGetName(&name[0], int32(len(name)), h), "cuDeviceGetName"); err != nil {
		return Device{}, err
	}
	attr := func(a int32) (int, error) {
		var v int32
		err := check(cu.DeviceGetAttribute(&v, a, h), "cuDeviceGetAttribute")
		return int(v), err
	}
	d := Device{Ordinal: int(i), Name: cString(name[:]), handle: h}
	var err error
	if d.Major, err = attr(attrCCMajor); err != nil {
		return Device{}, err
	}
	if d.Minor, err = attr(attrCCMinor); err != nil {
		return Device{}, err
	}
	if d.SMs, err = attr(attrMultiprocessor); err != nil {
		return Device{}, err
	}
	// The clock attribute is deprecated in newer drivers; a failure to
	// read it leaves ClockMHz 0 rather than hiding the device.
	if khz, err := attr(attrClockRate); err == nil {
		d.ClockMHz = khz / 1000
	}
	var mem uintptr
	if err := check(cu.DeviceTotalMem(&mem, h), "cuDeviceTotalMem_v2"); err != nil {
		return Device{}, err
	}
	d.GlobalMemory = int64(mem)
	return d, nil
}
