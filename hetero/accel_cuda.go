package hetero

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparsetune/sparsetune/hetero/cuda"
	"github.com/sparsetune/sparsetune/kernels/accel"
)

// cudaRuntime runs the accelerator jobs through the CUDA driver API: the
// device's primary context, the kernels of package accel compiled by NVRTC
// for its compute capability, and two non-blocking streams. Copies on the
// copy stream go through page-locked staging buffers, so that they run
// asynchronously and overlap the kernels on the other stream.
type cudaRuntime struct {
	ctx     *cuda.Context
	fns     map[string]*cuda.Function
	streams [2]*cuda.Stream

	mu      sync.Mutex
	buffers int // device buffers allocated and not yet freed
	staging []*stagingSlot
	next    int
}

// stagingSlot is a page-locked host buffer and the event of the last copy
// out of it, which must complete before the slot is filled again.
type stagingSlot struct {
	host *cuda.HostBuffer
	done *cuda.Event
}

// cudaGroup is the work-group (thread block) size: a multiple of the warp,
// and enough resident warps per SM at the kernels' register use.
const cudaGroup = 256

func listCUDA() ([]accelEntry, error) {
	devs, err := cuda.Devices()
	if err != nil {
		return nil, err
	}
	driver, _ := cuda.DriverVersion()
	entries := make([]accelEntry, len(devs))
	for i, dev := range devs {
		info := cudaInfo(fmt.Sprintf("cuda:%d", i), dev, driver)
		entries[i] = accelEntry{info, func() (*accelDevice, error) { return openCUDA(info, dev) }}
	}
	return entries, nil
}

func cudaInfo(name string, dev cuda.Device, driver string) Info {
	return Info{Name: name, Kind: GPU, Vendor: "NVIDIA", Model: fmt.Sprintf("%s (sm_%d%d)", dev.Name, dev.Major, dev.Minor),
		ComputeUnits: dev.SMs, ClockMHz: dev.ClockMHz, GlobalMemory: dev.GlobalMemory, Driver: "CUDA driver " + driver, Type: "gpu"}
}

// openCUDA opens the device discovery described as info.
func openCUDA(info Info, dev cuda.Device) (*accelDevice, error) {
	name := info.Name
	ctx, err := cuda.NewContext(dev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rt, err := newCUDARuntime(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", name, err), ctx.Close())
	}
	free, _, err := ctx.MemInfo()
	if err != nil {
		free = dev.GlobalMemory
	}
	d := &accelDevice{rt: rt, group: cudaGroup, maxAlloc: dev.GlobalMemory, info: info,
		defaultBudget: int64(float64(free) * DefaultMemoryFraction)}
	d.SetMemoryBudget(0)
	return d, nil
}

func newCUDARuntime(ctx *cuda.Context) (*cudaRuntime, error) {
	src, err := accel.Source(accel.CUDA, cudaGroup)
	if err != nil {
		return nil, err
	}
	mod, err := ctx.Compile(src)
	if err != nil {
		return nil, err
	}
	rt := &cudaRuntime{ctx: ctx, fns: make(map[string]*cuda.Function)}
	for _, name := range []string{accel.FillZero, accel.SpTTMCSR, accel.SpTTMELL, accel.SpTTMCOO,
		accel.MTTKRPCOO, accel.MTTKRPCSF, accel.MTTKRPALTO, accel.PhiCOO, accel.FMAPeak, accel.Triad} {
		if rt.fns[name], err = mod.Function(name); err != nil {
			return nil, err
		}
	}
	for i := range rt.streams {
		if rt.streams[i], err = ctx.NewStream(); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

func (rt *cudaRuntime) alloc(n int) (devMem, error) {
	b, err := rt.ctx.Alloc(n)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	rt.buffers++
	rt.mu.Unlock()
	return &cudaMem{rt: rt, b: b}, nil
}

func (rt *cudaRuntime) queue(i int) devQueue {
	return cudaQueue{rt: rt, s: rt.streams[i], staged: i == 1}
}

func (rt *cudaRuntime) live() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.buffers
}

// stage copies src into the next staging slot, growing it if needed, once
// the slot's previous copy is done, and returns the slot.
func (rt *cudaRuntime) stage(src []byte) (*stagingSlot, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	// Four slots: a streamed piece is two copies (indices and values),
	// and two pieces are in flight.
	if rt.staging == nil {
		rt.staging = make([]*stagingSlot, 4)
		for i := range rt.staging {
			rt.staging[i] = new(stagingSlot)
		}
	}
	slot := rt.staging[rt.next]
	rt.next = (rt.next + 1) % len(rt.staging)
	if slot.done != nil {
		err := slot.done.Wait()
		err = errors.Join(err, slot.done.Release())
		slot.done = nil
		if err != nil {
			return nil, err
		}
	}
	if slot.host == nil || len(slot.host.Bytes()) < len(src) {
		if slot.host != nil {
			if err := slot.host.Free(); err != nil {
				return nil, err
			}
			slot.host = nil
		}
		h, err := rt.ctx.AllocHost(max(len(src), 1<<20))
		if err != nil {
			return nil, err
		}
		slot.host = h
	}
	copy(slot.host.Bytes(), src)
	return slot, nil
}

type cudaMem struct {
	rt    *cudaRuntime
	b     *cuda.Buffer
	freed bool
}

func (m *cudaMem) size() int { return m.b.Size() }

func (m *cudaMem) free() error {
	if m.freed {
		return nil
	}
	m.freed = true
	m.rt.mu.Lock()
	m.rt.buffers--
	m.rt.mu.Unlock()
	return m.b.Free()
}

// cudaQueue is a stream; staged is set for the copy stream, whose writes go
// through page-locked memory.
type cudaQueue struct {
	rt     *cudaRuntime
	s      *cuda.Stream
	staged bool
}

// around records an event, queues op, and records another: the pair is
// the command's event.
func (q cudaQueue) around(op func() error) (devEvent, error) {
	start, err := q.s.Record()
	if err != nil {
		return nil, err
	}
	if err := op(); err != nil {
		return nil, errors.Join(err, start.Release())
	}
	end, err := q.s.Record()
	if err != nil {
		return nil, errors.Join(err, start.Release())
	}
	return cudaEvent{start, end}, nil
}

func (q cudaQueue) write(dst devMem, off int, src []byte) (devEvent, error) {
	b := dst.(*cudaMem).b
	if !q.staged {
		// From pageable memory the driver copies src before it returns.
		return q.around(func() error { return q.s.CopyToDevice(b, off, src) })
	}
	slot, err := q.rt.stage(src)
	if err != nil {
		return nil, err
	}
	ev, err := q.around(func() error { return q.s.CopyToDevice(b, off, slot.host.Bytes()[:len(src)]) })
	if err != nil {
		return nil, err
	}
	// The slot is free again once this copy is: record that apart from
	// the event the caller releases.
	if slot.done, err = q.s.Record(); err != nil {
		return nil, errors.Join(err, ev.wait(), ev.release())
	}
	return ev, nil
}

func (q cudaQueue) read(dst []byte, src devMem, off int) (devEvent, error) {
	b := src.(*cudaMem).b
	// Into pageable memory the copy is complete when the call returns.
	return q.around(func() error { return q.s.CopyToHost(dst, b, off) })
}

func (q cudaQueue) launch(kernel string, items, group int, args ...any) (devEvent, error) {
	f := q.rt.fns[kernel]
	if f == nil {
		return nil, fmt.Errorf("no kernel %q", kernel)
	}
	conv := make([]any, len(args))
	for i, a := range args {
		if m, ok := a.(*cudaMem); ok {
			a = m.b
		}
		conv[i] = a
	}
	return q.around(func() error { return q.s.Launch(f, items/group, group, 0, conv...) })
}

type cudaEvent struct{ start, end *cuda.Event }

func (e cudaEvent) wait() error { return e.end.Wait() }

func (e cudaEvent) elapsed() (time.Duration, error) {
	if err := e.end.Wait(); err != nil {
		return 0, err
	}
	return cuda.Elapsed(e.start, e.end)
}

func (e cudaEvent) release() error { return errors.Join(e.start.Release(), e.end.Release()) }
