package opencl

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Queue is a further in-order, profiling command queue on the context's
// device. Commands on different queues may run at the same time, which is
// how a transfer overlaps a kernel: queue the copy of the next block on one
// queue while the kernel on the current block runs on the other. Ordering
// between queues is the caller's, by waiting on events. Queues live until
// [Context.Close].
type Queue struct {
	c *Context
	h atomic.Uintptr
}

// NewQueue creates a command queue on the context's device.
func (c *Context) NewQueue() (*Queue, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == 0 {
		return nil, ErrClosed
	}
	var code int32
	h := cl.CreateCommandQueue(c.ctx, c.dev.id, queueProfilingEnable, &code)
	if err := check(code, "clCreateCommandQueue"); err != nil || h == 0 {
		if err == nil {
			err = errors.New("clCreateCommandQueue returned no queue")
		}
		return nil, c.wrap(err)
	}
	q := &Queue{c: c}
	q.h.Store(h)
	c.extra = append(c.extra, q)
	return q, nil
}

// queueOf returns the handle of q, or of the context's own queue when q is
// nil; c.mu is held shared.
func (c *Context) queueOf(q *Queue) (uintptr, error) {
	if q == nil {
		return c.queue, nil
	}
	if q.c != c {
		return 0, errors.New("opencl: queue belongs to another context")
	}
	h := q.h.Load()
	if h == 0 {
		return 0, fmt.Errorf("opencl: queue: %w", ErrReleased)
	}
	return h, nil
}

// WriteAsync queues a copy of data into b at byte offset on the queue, as
// [Buffer.WriteAsync] does on the context's queue.
func (q *Queue) WriteAsync(b *Buffer, offset int, data []byte) (*Event, error) {
	if b.c != q.c {
		return nil, errors.New("opencl: buffer belongs to another context than the queue")
	}
	return b.transfer(q, true, offset, data, true)
}

// ReadAsync queues a copy from byte offset of b into dst on the queue, as
// [Buffer.ReadAsync] does on the context's queue.
func (q *Queue) ReadAsync(b *Buffer, offset int, dst []byte) (*Event, error) {
	if b.c != q.c {
		return nil, errors.New("opencl: buffer belongs to another context than the queue")
	}
	return b.transfer(q, false, offset, dst, true)
}

// Enqueue queues a kernel on the queue, as [Context.Enqueue] does on the
// context's queue.
func (q *Queue) Enqueue(k *Kernel, global, local []int) (*Event, error) {
	return q.c.enqueue(q, k, global, local)
}

// Finish blocks until every command queued on the queue has completed.
func (q *Queue) Finish() error {
	c := q.c
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	h, err := c.queueOf(q)
	if err != nil {
		return err
	}
	return c.wrap(check(cl.Finish(h), "clFinish"))
}

// Live returns how many programs, kernels, buffers and events made through
// the context are still alive: a caller that releases what it makes can
// check that the number comes back to where it was.
func (c *Context) Live() int { return c.live() }
