package hetero

import (
	"errors"
	"fmt"
	"time"

	"github.com/sparsetune/sparsetune/hetero/opencl"
	"github.com/sparsetune/sparsetune/kernels/accel"
)

// clRuntime runs the accelerator jobs through OpenCL: one context on the
// device, the kernels built from package accel once when the device is
// opened, the context's queue for kernels and a second queue for copies.
type clRuntime struct {
	ctx     *opencl.Context
	copyQ   *opencl.Queue
	kernels map[string]*opencl.Kernel
}

// openOpenCL opens OpenCL device dev under the CLI name name.
func openOpenCL(name string, dev opencl.Device) (*accelDevice, error) {
	group := min(256, max(dev.MaxWorkGroupSize, 1))
	src, err := accel.Source(accel.OpenCL, group)
	if err != nil {
		return nil, err
	}
	return openOpenCLSource(name, dev, src, group)
}

// openOpenCLSource opens the device with the kernels built from src.
func openOpenCLSource(name string, dev opencl.Device, src string, group int) (*accelDevice, error) {
	ctx, err := opencl.NewContext(dev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rt, err := newCLRuntime(ctx, src, group)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), ctx.Close())
	}
	d := &accelDevice{rt: rt, group: group, maxAlloc: dev.MaxAllocBytes, info: clInfo(name, dev),
		defaultBudget: int64(float64(dev.GlobalMemBytes) * DefaultMemoryFraction)}
	d.SetMemoryBudget(0)
	return d, nil
}

// clInfo describes an OpenCL device.
func clInfo(name string, dev opencl.Device) Info {
	return Info{Name: name, Kind: GPU, Vendor: dev.Vendor, Model: fmt.Sprintf("%s [%s]", dev.Name, dev.Type), ComputeUnits: dev.ComputeUnits,
		ClockMHz: dev.MaxClockMHz, GlobalMemory: dev.GlobalMemBytes,
		Driver: fmt.Sprintf("%s, driver %s (%s)", dev.Version, dev.DriverVersion, dev.Platform), Type: clType(dev.Type)}
}

// clType names the hardware of an OpenCL device type for Info.Type.
func clType(t opencl.DeviceType) string {
	switch {
	case t&opencl.TypeGPU != 0:
		return "gpu"
	case t&opencl.TypeCPU != 0:
		return "cpu"
	case t&opencl.TypeAccelerator != 0:
		return "accelerator"
	}
	return "other"
}

func newCLRuntime(ctx *opencl.Context, src string, group int) (*clRuntime, error) {
	prog, err := ctx.Build(src, "-cl-std=CL1.2")
	if err != nil {
		return nil, err
	}
	rt := &clRuntime{ctx: ctx, kernels: make(map[string]*opencl.Kernel)}
	for _, name := range []string{accel.FillZero, accel.SpTTMCSR, accel.SpTTMELL, accel.SpTTMCOO,
		accel.MTTKRPCOO, accel.MTTKRPCSF, accel.MTTKRPALTO, accel.PhiCOO, accel.FMAPeak, accel.Triad} {
		if rt.kernels[name], err = prog.Kernel(name); err != nil {
			return nil, err
		}
	}
	if n, err := rt.kernels[accel.MTTKRPALTO].WorkGroupSize(); err == nil && n < group {
		return nil, fmt.Errorf("kernel %s runs in work-groups of at most %d, it was built for %d", accel.MTTKRPALTO, n, group)
	}
	if rt.copyQ, err = ctx.NewQueue(); err != nil {
		return nil, err
	}
	return rt, nil
}

func (rt *clRuntime) alloc(n int) (devMem, error) {
	b, err := rt.ctx.NewBuffer(n)
	if err != nil {
		return nil, err
	}
	return clMem{b}, nil
}

func (rt *clRuntime) queue(i int) devQueue {
	if i == 0 {
		return clQueue{rt: rt}
	}
	return clQueue{rt: rt, q: rt.copyQ}
}

// live counts the context's objects beyond the program and its kernels.
func (rt *clRuntime) live() int { return rt.ctx.Live() - 1 - len(rt.kernels) }

type clMem struct{ b *opencl.Buffer }

func (m clMem) size() int   { return m.b.Size() }
func (m clMem) free() error { return m.b.Release() }

// clQueue is the context's queue (q nil) or the copy queue.
type clQueue struct {
	rt *clRuntime
	q  *opencl.Queue
}

func (q clQueue) write(dst devMem, off int, src []byte) (devEvent, error) {
	b := dst.(clMem).b
	var ev *opencl.Event
	var err error
	if q.q == nil {
		ev, err = b.WriteAsync(off, src)
	} else {
		ev, err = q.q.WriteAsync(b, off, src)
	}
	return clEvent{ev}, err
}

func (q clQueue) read(dst []byte, src devMem, off int) (devEvent, error) {
	b := src.(clMem).b
	var ev *opencl.Event
	var err error
	if q.q == nil {
		ev, err = b.ReadAsync(off, dst)
	} else {
		ev, err = q.q.ReadAsync(b, off, dst)
	}
	return clEvent{ev}, err
}

func (q clQueue) launch(kernel string, items, group int, args ...any) (devEvent, error) {
	k := q.rt.kernels[kernel]
	if k == nil {
		return nil, fmt.Errorf("no kernel %q", kernel)
	}
	for i, a := range args {
		if m, ok := a.(clMem); ok {
			a = m.b
		}
		if err := k.SetArg(i, a); err != nil {
			return nil, err
		}
	}
	var ev *opencl.Event
	var err error
	if q.q == nil {
		ev, err = q.rt.ctx.Enqueue(k, []int{items}, []int{group})
	} else {
		ev, err = q.q.Enqueue(k, []int{items}, []int{group})
	}
	return clEvent{ev}, err
}

type clEvent struct{ e *opencl.Event }

func (e clEvent) wait() error                     { return e.e.Wait() }
func (e clEvent) elapsed() (time.Duration, error) { return e.e.Duration() }
func (e clEvent) release() error                  { return e.e.Release() }
