package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// Context is the primary context of one device, retained by [NewContext].
// Its methods, and those of the objects made through it, may be called
// from any goroutine: each call makes the context current on its OS thread
// for the duration of the call.
//
// The context keeps a list of the modules, buffers, host buffers, streams
// and events made through it; [Context.Close] frees those still alive,
// then releases the primary context.
type Context struct {
	dev Device

	// mu is held shared by every call that uses ctx (or a handle made in
	// it) and exclusively by Close, which zeroes ctx.
	mu  sync.RWMutex
	ctx uintptr // CUcontext

	objMu sync.Mutex
	objs  map[object]struct{}
}

// object is something Close must free: release frees the handle if it is
// still held (it is idempotent); it is called with the context current on
// the calling thread and c.mu held, shared or exclusively.
type object interface {
	release() error
	rank() int // release order in Close: events, streams, modules, buffers, host buffers
}

const numRanks = 5

// NewContext retains the primary context of dev, which must come from
// [Devices]. Several Contexts on one device share its primary context.
func NewContext(dev Device) (*Context, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	if dev.Name == "" {
		return nil, fmt.Errorf("cuda: device %d was not obtained from Devices", dev.Ordinal)
	}
	var ctx uintptr
	if err := check(cu.PrimaryCtxRetain(&ctx, dev.handle), "cuDevicePrimaryCtxRetain"); err != nil {
		return nil, fmt.Errorf("cuda: device %q: %w", dev.Name, err)
	}
	if ctx == 0 {
		cu.PrimaryCtxRelease(dev.handle)
		return nil, fmt.Errorf("cuda: device %q: cuDevicePrimaryCtxRetain returned no context", dev.Name)
	}
	return &Context{dev: dev, ctx: ctx, objs: make(map[object]struct{})}, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// do runs f with the context current on the calling OS thread: it locks
// the goroutine to its thread, pushes the context, runs f, pops the
// context and unlocks. It returns ErrClosed if the context is closed.
// f must not call do (Close could deadlock against the nested lock).
func (c *Context) do(f func() error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ctx == 0 {
		return ErrClosed
	}
	return c.current(f)
}

// current runs f with the context pushed on the calling thread; c.mu is
// held.
func (c *Context) current(f func() error) (err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check(cu.CtxPushCurrent(c.ctx), "cuCtxPushCurrent_v2"); err != nil {
		return err
	}
	defer func() {
		var popped uintptr
		if perr := check(cu.CtxPopCurrent(&popped), "cuCtxPopCurrent_v2"); perr != nil {
			err = errors.Join(err, perr)
		}
	}()
	return f()
}

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

// releaseObject is the body of every public Free, Close and Release
// method. After the context is closed it does nothing: Close freed o.
func (c *Context) releaseObject(o object) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	c.forget(o)
	if c.ctx == 0 {
		return nil
	}
	return c.wrap(c.current(o.release))
}

// wrap adds the device name to an error.
func (c *Context) wrap(err error) error {
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("cuda: device %q: %w", c.dev.Name, err)
}

// MemInfo returns the free and total device memory in bytes
// (cuMemGetInfo_v2). Free memory is device-wide: other contexts and
// processes use it too.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t uintptr
	err = c.do(func() error { return check(cu.MemGetInfo(&f, &t), "cuMemGetInfo_v2") })
	if err != nil {
		return 0, 0, c.wrap(err)
	}
	return int64(f), int64(t), nil
}

// Synchronize blocks until all work queued in the context has completed
// (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return c.wrap(c.do(func() error { return check(cu.CtxSynchronize(), "cuCtxSynchronize") }))
}

// Close waits for queued work, frees every object still alive that was
// made through the context, then releases the primary context. Calling it
// again does nothing and returns nil.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == 0 {
		return nil
	}
	c.objMu.Lock()
	objs := c.objs
	c.objs = make(map[object]struct{})
	c.objMu.Unlock()
	var errs []error
	err := c.current(func() error {
		// A sticky error from an earlier kernel shows here; freeing
		// goes on regardless.
		errs = append(errs, check(cu.CtxSynchronize(), "cuCtxSynchronize"))
		for rank := range numRanks {
			for o := range objs {
				if o.rank() == rank {
					errs = append(errs, o.release())
				}
			}
		}
		return nil
	})
	errs = append(errs, err)
	errs = append(errs, check(cu.PrimaryCtxRelease(c.dev.handle), "cuDevicePrimaryCtxRelease_v2"))
	c.ctx = 0
	return c.wrap(errors.Join(errs...))
}

// live reports how many objects the context is tracking (for tests).
func (c *Context) live() int {
	c.objMu.Lock()
	defer c.objMu.Unlock()
	return len(c.objs)
}
