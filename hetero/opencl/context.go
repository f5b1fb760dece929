package opencl

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sparsetune/sparsetune/internal/buildlog"
)

const contextPlatform = 0x1084 // CL_CONTEXT_PLATFORM

// Context is an OpenCL context on one device with one in-order command
// queue, created with profiling enabled. Its methods may be called from
// several goroutines; see [Kernel] for the one exception.
//
// The context keeps a list of the programs, kernels, buffers and events made
// through it; [Context.Close] releases those still alive, then the queue and
// the context. Objects may be released earlier, one by one, with their own
// Release method.
type Context struct {
	dev Device

	// mu is held shared by every call that uses ctx or queue (or a handle
	// made from them) and exclusively by Close, which zeroes them.
	mu    sync.RWMutex
	ctx   uintptr
	queue uintptr

	extra []*Queue // queues made by NewQueue; guarded by mu (written exclusively)

	objMu sync.Mutex
	objs  map[object]struct{}
}

// object is something Close must release: release frees the handle if it
// is still held (it is idempotent) and is called with c.mu held, shared or
// exclusively.
type object interface {
	release() error
	rank() int // release order in Close: events, kernels, programs, buffers
}

// NewContext opens a context and a profiling command queue on dev, which
// must come from [Devices] or [Platform.Devices].
func NewContext(dev Device) (*Context, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	if dev.id == 0 {
		return nil, fmt.Errorf("opencl: device %q was not obtained from Devices", dev.Name)
	}
	props := []uintptr{contextPlatform, dev.platform, 0}
	if dev.platform == 0 {
		props = props[2:]
	}
	id := dev.id
	var code int32
	ctx := cl.CreateContext(&props[0], 1, &id, 0, 0, &code)
	if err := check(code, "clCreateContext"); err != nil {
		return nil, fmt.Errorf("opencl: device %q: %w", dev.Name, err)
	}
	if ctx == 0 {
		return nil, fmt.Errorf("opencl: device %q: clCreateContext returned no context", dev.Name)
	}
	q := cl.CreateCommandQueue(ctx, id, queueProfilingEnable, &code)
	if err := check(code, "clCreateCommandQueue"); err != nil || q == 0 {
		cl.ReleaseContext(ctx)
		if err == nil {
			err = errors.New("clCreateCommandQueue returned no queue")
		}
		return nil, fmt.Errorf("opencl: device %q: %w", dev.Name, err)
	}
	return &Context{dev: dev, ctx: ctx, queue: q, objs: make(map[object]struct{})}, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// enter takes the shared lock if the context is open; leave drops it.
func (c *Context) enter() error {
	c.mu.RLock()
	if c.ctx == 0 {
		c.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (c *Context) leave() { c.mu.RUnlock() }

// track and forget maintain the list of live objects.
func (c *Context) track(o object) {
	c.objMu.Lock()
	c.objs[o] = struct{}{}
	c.objMu.Unlock()
}

func (c *Context) forget(o object) {
	c.objMu.Lock()
	delete(c.objs, o)
	c.objMu.Unlock()
}

// releaseObject is the body of every public Release method.
func (c *Context) releaseObject(o object) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.forget(o)
	return o.release()
}

// wrap adds the device name to an error.
func (c *Context) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("opencl: device %q: %w", c.dev.Name, err)
}

// Finish blocks until every command queued so far has completed.
func (c *Context) Finish() error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	return c.wrap(check(cl.Finish(c.queue), "clFinish"))
}

// Close waits for queued commands, releases every object still alive that
// was made through the context, then the queue and the context. Calling it
// again does nothing and returns nil.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == 0 {
		return nil
	}
	var errs []error
	for _, q := range c.extra {
		if h := q.h.Load(); h != 0 {
			errs = append(errs, check(cl.Finish(h), "clFinish"))
		}
	}
	errs = append(errs, check(cl.Finish(c.queue), "clFinish"))
	c.objMu.Lock()
	objs := c.objs
	c.objs = make(map[object]struct{})
	c.objMu.Unlock()
	for rank := range 4 {
		for o := range objs {
			if o.rank() == rank {
				errs = append(errs, o.release())
			}
		}
	}
	for _, q := range c.extra {
		if h := q.h.Swap(0); h != 0 {
			errs = append(errs, check(cl.ReleaseCommandQueue(h), "clReleaseCommandQueue"))
		}
	}
	c.extra = nil
	errs = append(errs, check(cl.ReleaseCommandQueue(c.queue), "clReleaseCommandQueue"))
	errs = append(errs, check(cl.ReleaseContext(c.ctx), "clReleaseContext"))
	c.ctx, c.queue = 0, 0
	return c.wrap(errors.Join(errs...))
}

// live reports how many objects the context is tracking (for tests).
func (c *Context) live() int {
	c.objMu.Lock()
	defer c.objMu.Unlock()
	return len(c.objs)
}

// BuildError is a failed program build. Its message names the device and
// quotes the start of the build log; Log holds the whole log.
type BuildError struct {
	Device  string // the device's name
	Options string // the build options
	Log     string // CL_PROGRAM_BUILD_LOG
	Err     error  // the clBuildProgram error, usually CL_BUILD_PROGRAM_FAILURE
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "opencl: building program for device %q failed: %v", e.Device, e.Err)
	if e.Options != "" {
		fmt.Fprintf(&b, " (options %q)", e.Options)
	}
	buildlog.Append(&b, "build log", e.Log)
	return b.String()
}

// Unwrap returns the clBuildProgram error.
func (e *BuildError) Unwrap() error { return e.Err }

// Program is OpenCL C source built for the context's device.
type Program struct {
	c   *Context
	h   atomic.Uintptr
	log string
}

// Build compiles OpenCL C source for the context's device with the given
// build options (e.g. "-cl-fast-relaxed-math"; "" for none). A compile
// error is a [*BuildError] naming the device and quoting the build log.
func (c *Context) Build(src, options string) (*Program, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()

	// clCreateProgramWithSource takes const char **: an array of pointers
	// to the source strings. Both live in Go memory; the text is pinned
	// because a pointer to it is stored in Go memory handed to C.
	text := append([]byte(src), 0)
	var pin runtime.Pinner
	pin.Pin(&text[0])
	defer pin.Unpin()
	srcs := []*byte{&text[0]}
	lens := []uintptr{uintptr(len(src))}
	var code int32
	h := cl.CreateProgramWithSrc(c.ctx, 1, &srcs[0], &lens[0], &code)
	runtime.KeepAlive(text)
	runtime.KeepAlive(srcs)
	if err := check(code, "clCreateProgramWithSource"); err != nil {
		return nil, c.wrap(err)
	}

	dev := c.dev.id
	status := cl.BuildProgram(h, 1, &dev, options, 0, 0)
	log := c.buildLog(h)
	if status != 0 {
		cl.ReleaseProgram(h)
		return nil, &BuildError{Device: c.dev.Name, Options: options, Log: log, Err: check(status, "clBuildProgram")}
	}
	p := &Program{c: c, log: log}
	p.h.Store(h)
	c.track(p)
	return p, nil
}

// buildLog returns the device's build log for program h, or "" if it
// cannot be read.
func (c *Context) buildLog(h uintptr) string {
	s, err := infoString(func(size uintptr, value unsafe.Pointer, ret *uintptr) int32 {
		return cl.GetProgramBuildInfo(h, c.dev.id, programBuildLog, size, value, ret)
	}, "clGetProgramBuildInfo")
	if err != nil {
		return ""
	}
	return s
}

// BuildLog returns the build log of a successful build (warnings, or
// nothing).
func (p *Program) BuildLog() string { return p.log }

// Release releases the program. Kernels made from it stay usable.
func (p *Program) Release() error { return p.c.releaseObject(p) }

func (p *Program) rank() int { return 2 }

func (p *Program) release() error {
	if h := p.h.Swap(0); h != 0 {
		return check(cl.ReleaseProgram(h), "clReleaseProgram")
	}
	return nil
}

// Kernel is one __kernel function of a [Program] with its arguments.
//
// OpenCL kernels keep their argument values in the kernel object, so a
// Kernel must not be set up by one goroutine while another sets its
// arguments or enqueues it; use one Kernel per goroutine.
type Kernel struct {
	c    *Context
	h    atomic.Uintptr
	name string

	mu   sync.Mutex
	bufs map[int]*Buffer // buffer arguments, checked before each enqueue
}

// Kernel creates a kernel object for the __kernel function called name.
func (p *Program) Kernel(name string) (*Kernel, error) {
	if err := p.c.enter(); err != nil {
		return nil, err
	}
	defer p.c.leave()
	ph := p.h.Load()
	if ph == 0 {
		return nil, fmt.Errorf("opencl: kernel %q: program: %w", name, ErrReleased)
	}
	var code int32
	h := cl.CreateKernel(ph, name, &code)
	if err := check(code, "clCreateKernel"); err != nil {
		return nil, p.c.wrap(fmt.Errorf("kernel %q: %w", name, err))
	}
	k := &Kernel{c: p.c, name: name, bufs: make(map[int]*Buffer)}
	k.h.Store(h)
	p.c.track(k)
	return k, nil
}

// Name returns the kernel's function name.
func (k *Kernel) Name() string { return k.name }

// LocalMem as a kernel argument reserves that many bytes of __local memory
// for a `__local T *` parameter.
type LocalMem int

// SetArg sets argument i (from 0) of the kernel. v is a *Buffer (a
// __global or __constant pointer parameter), an int32, uint32, int64,
// uint64, float32 or float64 scalar, or a [LocalMem] size. Go's int and
// uint are refused: their C width would be a guess.
func (k *Kernel) SetArg(i int, v any) error {
	if err := k.c.enter(); err != nil {
		return err
	}
	defer k.c.leave()
	h := k.h.Load()
	if h == 0 {
		return fmt.Errorf("opencl: kernel %q: %w", k.name, ErrReleased)
	}
	if i < 0 {
		return fmt.Errorf("opencl: kernel %q: argument index %d < 0", k.name, i)
	}
	k.mu.Lock()
	defer k.mu.Unlock()

	var code int32
	var buf *Buffer
	switch x := v.(type) {
	case *Buffer:
		if x == nil {
			return fmt.Errorf("opencl: kernel %q argument %d: nil *Buffer", k.name, i)
		}
		m := x.h.Load()
		if m == 0 {
			return fmt.Errorf("opencl: kernel %q argument %d: buffer: %w", k.name, i, ErrReleased)
		}
		if x.c != k.c {
			return fmt.Errorf("opencl: kernel %q argument %d: buffer belongs to another context", k.name, i)
		}
		code = cl.SetKernelArg(h, uint32(i), unsafe.Sizeof(m), unsafe.Pointer(&m))
		buf = x
	case LocalMem:
		if x <= 0 {
			return fmt.Errorf("opencl: kernel %q argument %d: local memory size %d <= 0", k.name, i, x)
		}
		code = cl.SetKernelArg(h, uint32(i), uintptr(x), nil)
	case int32:
		code = cl.SetKernelArg(h, uint32(i), 4, unsafe.Pointer(&x))
	case uint32:
		code = cl.SetKernelArg(h, uint32(i), 4, unsafe.Pointer(&x))
	case float32:
		code = cl.SetKernelArg(h, uint32(i), 4, unsafe.Pointer(&x))
	case int64:
		code = cl.SetKernelArg(h, uint32(i), 8, unsafe.Pointer(&x))
	case uint64:
		code = cl.SetKernelArg(h, uint32(i), 8, unsafe.Pointer(&x))
	case float64:
		code = cl.SetKernelArg(h, uint32(i), 8, unsafe.Pointer(&x))
	default:
		return fmt.Errorf("opencl: kernel %q argument %d: unsupported type %T (use *Buffer, int32, uint32, int64, uint64, float32, float64 or LocalMem)", k.name, i, v)
	}
	if err := check(code, "clSetKernelArg"); err != nil {
		return k.c.wrap(fmt.Errorf("kernel %q argument %d (%T): %w", k.name, i, v, err))
	}
	if buf != nil {
		k.bufs[i] = buf
	} else {
		delete(k.bufs, i)
	}
	return nil
}

// SetArgs sets arguments 0, 1, ... to args, as SetArg does.
func (k *Kernel) SetArgs(args ...any) error {
	for i, a := range args {
		if err := k.SetArg(i, a); err != nil {
			return err
		}
	}
	return nil
}

// WorkGroupSize returns the largest work-group size the device can run
// this kernel with (CL_KERNEL_WORK_GROUP_SIZE).
func (k *Kernel) WorkGroupSize() (int, error) {
	if err := k.c.enter(); err != nil {
		return 0, err
	}
	defer k.c.leave()
	h := k.h.Load()
	if h == 0 {
		return 0, fmt.Errorf("opencl: kernel %q: %w", k.name, ErrReleased)
	}
	var n uintptr
	err := check(cl.GetKernelWorkGroupInfo(h, k.c.dev.id, kernelWorkGroupSize, unsafe.Sizeof(n), unsafe.Pointer(&n), nil), "clGetKernelWorkGroupInfo")
	return int(n), k.c.wrap(err)
}

// Release releases the kernel.
func (k *Kernel) Release() error { return k.c.releaseObject(k) }

func (k *Kernel) rank() int { return 1 }

func (k *Kernel) release() error {
	if h := k.h.Swap(0); h != 0 {
		return check(cl.ReleaseKernel(h), "clReleaseKernel")
	}
	return nil
}

// Enqueue queues the kernel over an NDRange of global work-items in 1 to 3
// dimensions, in work-groups of local size, or of a size the driver picks
// when local is nil. The returned event completes when the kernel has run;
// Release it (or Close the context) when done with it.
func (c *Context) Enqueue(k *Kernel, global, local []int) (*Event, error) {
	return c.enqueue(nil, k, global, local)
}

// Run enqueues the kernel as Enqueue does and waits for it.
func (c *Context) Run(k *Kernel, global, local []int) error {
	ev, err := c.enqueue(nil, k, global, local)
	if err != nil {
		return err
	}
	err = ev.Wait()
	return errors.Join(err, ev.Release())
}

func (c *Context) enqueue(q *Queue, k *Kernel, global, local []int) (*Event, error) {
	if k == nil {
		return nil, errors.New("opencl: Enqueue: nil kernel")
	}
	if k.c != c {
		return nil, fmt.Errorf("opencl: kernel %q belongs to another context", k.name)
	}
	dims := len(global)
	if dims < 1 || dims > 3 {
		return nil, fmt.Errorf("opencl: kernel %q: %d global dimensions, want 1 to 3", k.name, dims)
	}
	if local != nil && len(local) != dims {
		return nil, fmt.Errorf("opencl: kernel %q: %d local dimensions for %d global", k.name, len(local), dims)
	}
	var g, l [3]uintptr
	for i, n := range global {
		if n <= 0 {
			return nil, fmt.Errorf("opencl: kernel %q: global size %v has a dimension <= 0", k.name, global)
		}
		g[i] = uintptr(n)
	}
	var lp *uintptr
	if local != nil {
		for i, n := range local {
			if n <= 0 {
				return nil, fmt.Errorf("opencl: kernel %q: local size %v has a dimension <= 0", k.name, local)
			}
			l[i] = uintptr(n)
		}
		lp = &l[0]
	}

	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	h := k.h.Load()
	if h == 0 {
		return nil, fmt.Errorf("opencl: kernel %q: %w", k.name, ErrReleased)
	}
	queue, err := c.queueOf(q)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, b := range k.bufs {
		if b.h.Load() == 0 {
			return nil, fmt.Errorf("opencl: kernel %q argument %d: buffer: %w", k.name, i, ErrReleased)
		}
	}
	var ev uintptr
	code := cl.EnqueueNDRangeKernel(queue, h, uint32(dims), nil, &g[0], lp, 0, nil, &ev)
	if err := check(code, "clEnqueueNDRangeKernel"); err != nil {
		return nil, c.wrap(fmt.Errorf("kernel %q global %v local %v: %w", k.name, global, local, err))
	}
	cl.Flush(queue)
	return c.newEvent(ev, "kernel "+k.name, nil, nil), nil
}
