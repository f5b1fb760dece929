package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Buffer is device memory allocated with cuMemAlloc_v2.
type Buffer struct {
	c    *Context
	ptr  atomic.Uint64 // CUdeviceptr; 0 once freed
	size int
}

// Alloc allocates n bytes of device memory (contents undefined; see
// [Stream.Zero]). n may be 0: the buffer then holds nothing but is backed
// by a few bytes, so that it still has an address to pass to kernels.
func (c *Context) Alloc(n int) (*Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: Alloc: size %d < 0", n)
	}
	b := &Buffer{c: c, size: n}
	err := c.do(func() error {
		var p uint64
		if err := check(cu.MemAlloc(&p, uintptr(max(n, 4))), "cuMemAlloc_v2"); err != nil {
			return err
		}
		b.ptr.Store(p)
		c.track(b)
		return nil
	})
	if err != nil {
		return nil, c.wrap(fmt.Errorf("buffer of %d bytes: %w", n, err))
	}
	return b, nil
}

// Size returns the buffer's size in bytes.
func (b *Buffer) Size() int { return b.size }

// Free frees the device memory. Calling it again does nothing.
func (b *Buffer) Free() error { return b.c.releaseObject(b) }

func (b *Buffer) rank() int { return 3 }

func (b *Buffer) release() error {
	if p := b.ptr.Swap(0); p != 0 {
		return check(cu.MemFree(p), "cuMemFree_v2")
	}
	return nil
}

// devicePtr returns the buffer's address plus off after checking that the
// buffer is alive and belongs to c.
func (b *Buffer) devicePtr(c *Context, off int) (uint64, error) {
	if b == nil {
		return 0, fmt.Errorf("nil *Buffer")
	}
	if b.c != c {
		return 0, fmt.Errorf("buffer belongs to another context")
	}
	p := b.ptr.Load()
	if p == 0 {
		return 0, fmt.Errorf("buffer: %w", ErrReleased)
	}
	return p + uint64(off), nil
}

// HostBuffer is page-locked ("pinned") host memory allocated with
// cuMemHostAlloc. Copies between it and device memory run asynchronously
// and at full bus speed.
type HostBuffer struct {
	c    *Context
	p    atomic.Pointer[byte] // C memory; nil once freed
	size int
}

// AllocHost allocates n bytes of page-locked host memory.
func (c *Context) AllocHost(n int) (*HostBuffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: AllocHost: size %d < 0", n)
	}
	h := &HostBuffer{c: c, size: n}
	err := c.do(func() error {
		var p unsafe.Pointer
		if err := check(cu.MemHostAlloc(&p, uintptr(max(n, 4)), 0), "cuMemHostAlloc"); err != nil {
			return err
		}
		h.p.Store((*byte)(p))
		c.track(h)
		return nil
	})
	if err != nil {
		return nil, c.wrap(fmt.Errorf("host buffer of %d bytes: %w", n, err))
	}
	return h, nil
}

// Bytes returns the pinned memory as a slice of length Size, or nil once
// the buffer is freed. The slice must not be used after Free (or after the
// Context is closed): it points at memory the driver owns.
func (h *HostBuffer) Bytes() []byte {
	p := h.p.Load()
	if p == nil {
		return nil
	}
	return unsafe.Slice(p, h.size)
}

// Size returns the buffer's size in bytes.
func (h *HostBuffer) Size() int { return h.size }

// Free frees the pinned memory. Calling it again does nothing.
func (h *HostBuffer) Free() error { return h.c.releaseObject(h) }

func (h *HostBuffer) rank() int { return 4 }

func (h *HostBuffer) release() error {
	if p := h.p.Swap(nil); p != nil {
		return check(cu.MemFreeHost(unsafe.Pointer(p)), "cuMemFreeHost")
	}
	return nil
}
