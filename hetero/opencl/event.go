package opencl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Event is a queued command: a kernel run, a transfer or a fill. Wait
// blocks until it completes; Duration reports its device time from the
// queue's profiling counters. Release it when done, or leave it to
// [Context.Close].
type Event struct {
	c  *Context // nil for an event that was complete when made
	h  atomic.Uintptr
	op string

	mu   sync.Mutex
	pin  *runtime.Pinner // pins Go memory the command reads or writes
	keep any             // that memory, kept reachable until completion
	done bool
	err  error // the command's failure, if any
	// start and end are CL_PROFILING_COMMAND_START and _END in ns; perr
	// is the error from reading them.
	start, end uint64
	perr       error
}

// newEvent wraps event handle h and tracks it in c; c.mu is held shared.
func (c *Context) newEvent(h uintptr, op string, pin *runtime.Pinner, keep any) *Event {
	e := &Event{c: c, op: op, pin: pin, keep: keep}
	e.h.Store(h)
	c.track(e)
	return e
}

// doneEvent is an event for a command that needed no work (a zero-length
// transfer): complete, with zero duration.
func doneEvent(op string) *Event {
	return &Event{op: op, done: true}
}

// Wait blocks until the command has completed. It returns the command's
// error if it failed; calling it again returns the same result.
func (e *Event) Wait() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.waitLocked()
}

func (e *Event) waitLocked() error {
	if e.done {
		return e.err
	}
	h := e.h.Load()
	if h == 0 {
		return fmt.Errorf("opencl: event %s: %w", e.op, ErrReleased)
	}
	e.done = true
	if err := check(cl.WaitForEvents(1, &h), "clWaitForEvents"); err != nil {
		e.err = fmt.Errorf("opencl: %s: %w", e.op, err)
	}
	e.unpin()
	if e.err == nil {
		e.perr = errors.Join(
			check(cl.GetEventProfilingInfo(h, profilingStart, 8, unsafe.Pointer(&e.start), nil), "clGetEventProfilingInfo(START)"),
			check(cl.GetEventProfilingInfo(h, profilingEnd, 8, unsafe.Pointer(&e.end), nil), "clGetEventProfilingInfo(END)"))
		if e.perr != nil {
			e.perr = fmt.Errorf("opencl: %s: %w", e.op, e.perr)
		}
	}
	return e.err
}

func (e *Event) unpin() {
	if e.pin != nil {
		e.pin.Unpin()
		e.pin = nil
	}
	e.keep = nil
}

// Duration waits for the command and returns the time the device spent
// on it, from CL_PROFILING_COMMAND_START to CL_PROFILING_COMMAND_END.
func (e *Event) Duration() (time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.waitLocked(); err != nil {
		return 0, err
	}
	if e.perr != nil {
		return 0, e.perr
	}
	if e.end < e.start {
		return 0, fmt.Errorf("opencl: %s: profiling end %d before start %d", e.op, e.end, e.start)
	}
	return time.Duration(e.end - e.start), nil
}

// Release releases the event. If the command still uses Go memory (an
// asynchronous read or write), Release first waits for it. Wait and
// Duration keep working after Release if they had been called before.
func (e *Event) Release() error {
	if e.c == nil {
		return nil
	}
	return e.c.releaseObject(e)
}

func (e *Event) rank() int { return 0 }

func (e *Event) release() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.h.Load()
	if h == 0 {
		return nil
	}
	var err error
	if !e.done && e.pin != nil {
		err = e.waitLocked()
	}
	e.h.Store(0)
	return errors.Join(err, check(cl.ReleaseEvent(h), "clReleaseEvent"))
}
