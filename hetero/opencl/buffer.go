package opencl

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Buffer is a read-write buffer in the device's global memory.
type Buffer struct {
	c    *Context
	h    atomic.Uintptr
	size int
}

// NewBuffer allocates size bytes of device memory (contents undefined; see
// [Buffer.Zero]). A zero size is allowed: the buffer holds nothing.
func (c *Context) NewBuffer(size int) (*Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("opencl: NewBuffer: size %d < 0", size)
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	var code int32
	// OpenCL refuses empty buffers; back an empty one by a few bytes.
	m := cl.CreateBuffer(c.ctx, memReadWrite, uintptr(max(size, 4)), nil, &code)
	if err := check(code, "clCreateBuffer"); err != nil {
		return nil, c.wrap(fmt.Errorf("buffer of %d bytes: %w", size, err))
	}
	b := &Buffer{c: c, size: size}
	b.h.Store(m)
	c.track(b)
	return b, nil
}

// Size returns the buffer's size in bytes.
func (b *Buffer) Size() int { return b.size }

// Release frees the device memory.
func (b *Buffer) Release() error { return b.c.releaseObject(b) }

func (b *Buffer) rank() int { return 3 }

func (b *Buffer) release() error {
	if h := b.h.Swap(0); h != 0 {
		return check(cl.ReleaseMemObject(h), "clReleaseMemObject")
	}
	return nil
}

// Write copies data into the buffer at byte offset and returns when the
// copy is done.
func (b *Buffer) Write(offset int, data []byte) error {
	_, err := b.transfer(nil, true, offset, asBytes(data), false)
	return err
}

// WriteAsync queues a copy of data into the buffer at byte offset. data
// must not be modified until the event has completed (Wait, or Release,
// which waits).
func (b *Buffer) WriteAsync(offset int, data []byte) (*Event, error) {
	return b.transfer(nil, true, offset, asBytes(data), true)
}

// Read copies len(dst) bytes from byte offset of the buffer into dst and
// returns when the copy is done.
func (b *Buffer) Read(offset int, dst []byte) error {
	_, err := b.transfer(nil, false, offset, asBytes(dst), false)
	return err
}

// ReadAsync queues a copy from byte offset of the buffer into dst. dst
// holds the data once the event has completed; it must not be used before.
func (b *Buffer) ReadAsync(offset int, dst []byte) (*Event, error) {
	return b.transfer(nil, false, offset, asBytes(dst), true)
}

// transfer queues a read or write of p between host memory and the buffer.
// on queue q (nil for the context's own). A blocking transfer returns a nil
// event.
func (b *Buffer) transfer(q *Queue, write bool, offset int, p []byte, async bool) (*Event, error) {
	op := "read"
	if write {
		op = "write"
	}
	n := len(p)
	if offset < 0 || offset > b.size || n > b.size-offset {
		return nil, fmt.Errorf("opencl: buffer %s of %d bytes at offset %d: out of range of %d-byte buffer", op, n, offset, b.size)
	}
	if n == 0 {
		if async {
			return doneEvent("buffer " + op), nil
		}
		return nil, nil
	}
	c := b.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	m := b.h.Load()
	if m == 0 {
		return nil, fmt.Errorf("opencl: buffer %s: %w", op, ErrReleased)
	}
	queue, err := c.queueOf(q)
	if err != nil {
		return nil, err
	}
	ptr := unsafe.Pointer(&p[0])
	if !async {
		var code int32
		if write {
			code = cl.EnqueueWriteBuffer(queue, m, clTrue, uintptr(offset), uintptr(n), ptr, 0, nil, nil)
		} else {
			code = cl.EnqueueReadBuffer(queue, m, clTrue, uintptr(offset), uintptr(n), ptr, 0, nil, nil)
		}
		runtime.KeepAlive(p)
		return nil, c.wrap(check(code, enqueueName(write)))
	}
	// The driver uses p after the call returns: pin it until the event
	// completes (Event.Wait or Event.Release unpins it).
	pin := new(runtime.Pinner)
	pin.Pin(ptr)
	var ev uintptr
	var code int32
	if write {
		code = cl.EnqueueWriteBuffer(queue, m, clFalse, uintptr(offset), uintptr(n), ptr, 0, nil, &ev)
	} else {
		code = cl.EnqueueReadBuffer(queue, m, clFalse, uintptr(offset), uintptr(n), ptr, 0, nil, &ev)
	}
	if err := check(code, enqueueName(write)); err != nil {
		pin.Unpin()
		return nil, c.wrap(err)
	}
	cl.Flush(queue)
	return c.newEvent(ev, "buffer "+op, pin, p), nil
}

func enqueueName(write bool) string {
	if write {
		return "clEnqueueWriteBuffer"
	}
	return "clEnqueueReadBuffer"
}

// Zero sets every byte of the buffer to zero and returns when done.
func (b *Buffer) Zero() error {
	ev, err := b.ZeroAsync()
	if err != nil {
		return err
	}
	err = ev.Wait()
	if rerr := ev.Release(); err == nil {
		err = rerr
	}
	return err
}

// ZeroAsync queues filling the buffer with zero bytes (clEnqueueFillBuffer).
func (b *Buffer) ZeroAsync() (*Event, error) {
	if b.size == 0 {
		return doneEvent("buffer fill"), nil
	}
	c := b.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.leave()
	m := b.h.Load()
	if m == 0 {
		return nil, fmt.Errorf("opencl: buffer fill: %w", ErrReleased)
	}
	// The size must be a multiple of the pattern size; the pattern is
	// copied by the call.
	var pattern uint32
	psize := uintptr(4)
	switch {
	case b.size%4 == 0:
	case b.size%2 == 0:
		psize = 2
	default:
		psize = 1
	}
	var ev uintptr
	code := cl.EnqueueFillBuffer(c.queue, m, unsafe.Pointer(&pattern), psize, 0, uintptr(b.size), 0, nil, &ev)
	if err := check(code, "clEnqueueFillBuffer"); err != nil {
		return nil, c.wrap(err)
	}
	cl.Flush(c.queue)
	return c.newEvent(ev, "buffer fill", nil, nil), nil
}

// Scalar is an element type the typed transfer helpers accept.
type Scalar interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// asBytes views a slice of scalars as its bytes.
func asBytes[T Scalar](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

func sizeOf[T Scalar]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// Write copies data into b starting at element off (in units of T) and
// returns when done.
func Write[T Scalar](b *Buffer, off int, data []T) error {
	_, err := b.transfer(nil, true, off*sizeOf[T](), asBytes(data), false)
	return err
}

// WriteAsync queues copying data into b starting at element off; data must
// not change until the event completes.
func WriteAsync[T Scalar](b *Buffer, off int, data []T) (*Event, error) {
	return b.transfer(nil, true, off*sizeOf[T](), asBytes(data), true)
}

// Read copies len(dst) elements from b, starting at element off, into dst
// and returns when done.
func Read[T Scalar](b *Buffer, off int, dst []T) error {
	_, err := b.transfer(nil, false, off*sizeOf[T](), asBytes(dst), false)
	return err
}

// ReadAsync queues copying len(dst) elements from b, starting at element
// off, into dst; dst is valid once the event completes.
func ReadAsync[T Scalar](b *Buffer, off int, dst []T) (*Event, error) {
	return b.transfer(nil, false, off*sizeOf[T](), asBytes(dst), true)
}

// NewBufferFrom allocates a buffer the size of data and copies data in.
func NewBufferFrom[T Scalar](c *Context, data []T) (*Buffer, error) {
	b, err := c.NewBuffer(len(data) * sizeOf[T]())
	if err != nil {
		return nil, err
	}
	if err := Write(b, 0, data); err != nil {
		b.Release()
		return nil, err
	}
	return b, nil
}

// WriteFloat32 copies data to the start of b.
func WriteFloat32(b *Buffer, data []float32) error { return Write(b, 0, data) }

// WriteUint32 copies data to the start of b.
func WriteUint32(b *Buffer, data []uint32) error { return Write(b, 0, data) }

// WriteInt32 copies data to the start of b.
func WriteInt32(b *Buffer, data []int32) error { return Write(b, 0, data) }

// ReadFloat32 fills dst from the start of b.
func ReadFloat32(b *Buffer, dst []float32) error { return Read(b, 0, dst) }

// ReadUint32 fills dst from the start of b.
func ReadUint32(b *Buffer, dst []uint32) error { return Read(b, 0, dst) }

// ReadInt32 fills dst from the start of b.
func ReadInt32(b *Buffer, dst []int32) error { return Read(b, 0, dst) }
