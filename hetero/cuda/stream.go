package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Stream is a CUDA stream, created non-blocking (it does not synchronize
// with the legacy default stream). Work queued on one stream runs in
// order.
type Stream struct {
	c *Context
	h atomic.Uintptr // CUstream; 0 once destroyed
}

// NewStream creates a stream (cuStreamCreate with CU_STREAM_NON_BLOCKING).
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	err := c.do(func() error {
		var h uintptr
		if err := check(cu.StreamCreate(&h, streamNonBlocking), "cuStreamCreate"); err != nil {
			return err
		}
		s.h.Store(h)
		c.track(s)
		return nil
	})
	if err != nil {
		return nil, c.wrap(err)
	}
	return s, nil
}

// run runs f with the context current and the stream's handle, after
// checking the stream is alive.
func (s *Stream) run(op string, f func(h uintptr) error) error {
	err := s.c.do(func() error {
		h := s.h.Load()
		if h == 0 {
			return fmt.Errorf("stream: %w", ErrReleased)
		}
		return f(h)
	})
	if err != nil {
		return s.c.wrap(fmt.Errorf("%s: %w", op, err))
	}
	return nil
}

// checkRange checks that n bytes at off lie within a buffer of size bytes.
func checkRange(op string, off, n, size int) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("cuda: %s of %d bytes at offset %d: out of range of %d-byte buffer", op, n, off, size)
	}
	return nil
}

// CopyToDevice queues a copy of src into dst at byte offset off
// (cuMemcpyHtoDAsync_v2). It is asynchronous with respect to the host when
// src is page-locked ([HostBuffer.Bytes]), which must then not change until
// the stream reaches the copy; from ordinary Go memory the driver copies
// src to a staging buffer before returning.
func (s *Stream) CopyToDevice(dst *Buffer, off int, src []byte) error {
	if dst == nil {
		return errors.New("cuda: CopyToDevice: nil *Buffer")
	}
	if err := checkRange("CopyToDevice", off, len(src), dst.size); err != nil || len(src) == 0 {
		return err
	}
	return s.run("CopyToDevice", func(h uintptr) error {
		p, err := dst.devicePtr(s.c, off)
		if err != nil {
			return err
		}
		err = check(cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), uintptr(len(src)), h), "cuMemcpyHtoDAsync_v2")
		runtime.KeepAlive(src)
		return err
	})
}

// CopyToHost queues a copy of len(dst) bytes from src at byte offset off
// into dst (cuMemcpyDtoHAsync_v2). When dst is page-locked
// ([HostBuffer.Bytes]) the copy is asynchronous: dst holds the data once
// the stream has reached it (see [Stream.Synchronize], [Event.Wait]). Into
// ordinary Go memory the call returns only when the copy is complete.
func (s *Stream) CopyToHost(dst []byte, src *Buffer, off int) error {
	if src == nil {
		return errors.New("cuda: CopyToHost: nil *Buffer")
	}
	if err := checkRange("CopyToHost", off, len(dst), src.size); err != nil || len(dst) == 0 {
		return err
	}
	return s.run("CopyToHost", func(h uintptr) error {
		p, err := src.devicePtr(s.c, off)
		if err != nil {
			return err
		}
		err = check(cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), p, uintptr(len(dst)), h), "cuMemcpyDtoHAsync_v2")
		runtime.KeepAlive(dst)
		return err
	})
}

// Zero queues setting n bytes of b, from byte offset off, to zero
// (cuMemsetD8Async).
func (s *Stream) Zero(b *Buffer, off, n int) error {
	if b == nil {
		return errors.New("cuda: Zero: nil *Buffer")
	}
	if err := checkRange("Zero", off, n, b.size); err != nil || n == 0 {
		return err
	}
	return s.run("Zero", func(h uintptr) error {
		p, err := b.devicePtr(s.c, off)
		if err != nil {
			return err
		}
		return check(cu.MemsetD8Async(p, 0, uintptr(n), h), "cuMemsetD8Async")
	})
}

// packArgs stores each kernel argument in its own 8-byte slot of vals, as
// the kernel's parameter of that type expects it: a *Buffer as its
// CUdeviceptr, a scalar in its C representation. Go's int, uint and
// uintptr are refused: their C width would be a guess.
func packArgs(c *Context, args []any) ([]uint64, error) {
	vals := make([]uint64, len(args))
	for i, a := range args {
		slot := unsafe.Pointer(&vals[i])
		switch x := a.(type) {
		case *Buffer:
			p, err := x.devicePtr(c, 0)
			if err != nil {
				return nil, fmt.Errorf("argument %d: %w", i, err)
			}
			vals[i] = p
		case int32:
			*(*int32)(slot) = x
		case uint32:
			*(*uint32)(slot) = x
		case int64:
			*(*int64)(slot) = x
		case uint64:
			vals[i] = x
		case float32:
			*(*float32)(slot) = x
		case float64:
			*(*float64)(slot) = x
		case int, uint, uintptr:
			return nil, fmt.Errorf("argument %d: Go %T has no fixed C width; convert it to int32, uint32, int64 or uint64", i, a)
		default:
			return nil, fmt.Errorf("argument %d: unsupported type %T (use *Buffer, int32, uint32, int64, uint64, float32 or float64)", i, a)
		}
	}
	return vals, nil
}

// Launch queues kernel f on a 1-D grid of grid blocks of block threads
// each, with sharedBytes of dynamic shared memory (cuLaunchKernel). args
// are the kernel's parameters in order: a *Buffer for a pointer parameter,
// or an int32, uint32, int64, uint64, float32 or float64 scalar matching
// the parameter's C type exactly.
func (s *Stream) Launch(f *Function, grid, block, sharedBytes int, args ...any) error {
	if f == nil {
		return errors.New("cuda: Launch: nil *Function")
	}
	if f.m.c != s.c {
		return fmt.Errorf("cuda: kernel %q belongs to another context", f.name)
	}
	if grid <= 0 || block <= 0 || sharedBytes < 0 || grid > math.MaxInt32 || block > math.MaxInt32 || sharedBytes > math.MaxInt32 {
		return fmt.Errorf("cuda: kernel %q: bad launch shape grid %d, block %d, shared %d bytes", f.name, grid, block, sharedBytes)
	}
	op := fmt.Sprintf("kernel %q grid %d block %d", f.name, grid, block)
	return s.run(op, func(h uintptr) error {
		if f.m.h.Load() == 0 {
			return fmt.Errorf("module: %w", ErrReleased)
		}
		vals, err := packArgs(s.c, args)
		if err != nil {
			return err
		}
		// kernelParams is a C array of pointers to the values. Both
		// arrays live in Go memory; pin them for the call, since the
		// pointer array holds Go pointers into vals.
		var params unsafe.Pointer
		var pin runtime.Pinner
		defer pin.Unpin()
		if len(vals) > 0 {
			ptrs := make([]unsafe.Pointer, len(vals))
			pin.Pin(&vals[0])
			for i := range vals {
				ptrs[i] = unsafe.Pointer(&vals[i])
			}
			pin.Pin(&ptrs[0])
			params = unsafe.Pointer(&ptrs[0])
		}
		err = check(cu.LaunchKernel(f.h, uint32(grid), 1, 1, uint32(block), 1, 1, uint32(sharedBytes), h, params, nil), "cuLaunchKernel")
		runtime.KeepAlive(vals)
		return err
	})
}

// Synchronize blocks until all work queued on the stream has completed
// (cuStreamSynchronize).
func (s *Stream) Synchronize() error {
	return s.run("Synchronize", func(h uintptr) error {
		return check(cu.StreamSynchronize(h), "cuStreamSynchronize")
	})
}

// Close destroys the stream (cuStreamDestroy_v2); work already queued on it
// still completes. Calling it again does nothing.
func (s *Stream) Close() error { return s.c.releaseObject(s) }

func (s *Stream) rank() int { return 1 }

func (s *Stream) release() error {
	if h := s.h.Swap(0); h != 0 {
		return check(cu.StreamDestroy(h), "cuStreamDestroy_v2")
	}
	return nil
}

// Event marks a point in a stream's work, with timing enabled.
type Event struct {
	c *Context
	h atomic.Uintptr // CUevent; 0 once released
}

// Record creates an event and records it on the stream: it completes when
// the work queued before it has (cuEventCreate + cuEventRecord).
func (s *Stream) Record() (*Event, error) {
	e := &Event{c: s.c}
	err := s.run("Record", func(sh uintptr) error {
		var h uintptr
		if err := check(cu.EventCreate(&h, eventDefault), "cuEventCreate"); err != nil {
			return err
		}
		if err := check(cu.EventRecord(h, sh), "cuEventRecord"); err != nil {
			cu.EventDestroy(h)
			return err
		}
		e.h.Store(h)
		s.c.track(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Wait blocks until the event has completed (cuEventSynchronize).
func (e *Event) Wait() error {
	err := e.c.do(func() error {
		h := e.h.Load()
		if h == 0 {
			return fmt.Errorf("event: %w", ErrReleased)
		}
		return check(cu.EventSynchronize(h), "cuEventSynchronize")
	})
	return e.c.wrap(err)
}

// Elapsed waits for end and returns the device time between start and end,
// two events recorded in the same context (cuEventElapsedTime, with a
// resolution of about half a microsecond).
func Elapsed(start, end *Event) (time.Duration, error) {
	if start == nil || end == nil {
		return 0, errors.New("cuda: Elapsed: nil *Event")
	}
	if start.c != end.c {
		return 0, errors.New("cuda: Elapsed: events from different contexts")
	}
	var ms float32
	err := start.c.do(func() error {
		a, b := start.h.Load(), end.h.Load()
		if a == 0 || b == 0 {
			return fmt.Errorf("event: %w", ErrReleased)
		}
		if err := check(cu.EventSynchronize(b), "cuEventSynchronize"); err != nil {
			return err
		}
		return check(cu.EventElapsedTime(&ms, a, b), "cuEventElapsedTime")
	})
	if err != nil {
		return 0, start.c.wrap(err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Release destroys the event (cuEventDestroy_v2). Calling it again does
// nothing.
func (e *Event) Release() error { return e.c.releaseObject(e) }

func (e *Event) rank() int { return 0 }

func (e *Event) release() error {
	if h := e.h.Swap(0); h != 0 {
		return check(cu.EventDestroy(h), "cuEventDestroy_v2")
	}
	return nil
}
