package par

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A Helper is a set of goroutines that poll for work instead of parking,
// for a bounded time, so that work of a few tens of microseconds can be
// split with them. A goroutine started, or woken from parking, when the work is
// at hand runs on another core 85-155 µs later in a one-shot process on
// the 2-core VMs measured (the idle core has to be woken through the
// hypervisor), which is longer than the work; a Helper started that long
// before the work, while the caller does something else, is already
// running when Each hands it the work (1.5-2 µs). This is an OpenMP
// runtime's active wait, as the kernels' worker pool does it.
//
// While they poll they yield their processors between polls
// (runtime.Gosched), so other goroutines that are ready to run go first,
// but cores with nothing else to do are kept busy until the Helper stops:
// its spin bounds that.
type Helper struct {
	job  atomic.Pointer[job]
	stop atomic.Bool
}

// job is one call of Each: f for every index below n, each taken once
// from next, and left counting those not yet finished.
type job struct {
	f    func(i int)
	n    int64
	next atomic.Int64
	left atomic.Int64
}

// StartHelper starts a Helper of n goroutines, at most one fewer than
// the processors (GOMAXPROCS), that poll for at most spin, or until Stop,
// whichever is first. It returns nil, a Helper that runs nothing, when
// that leaves none.
//
// warm, when not nil, is called first on each of the goroutines, which
// poll once it returns: work that readies a core for the calls to come,
// done while the caller does something else. Each does not wait for it:
// calls it hands out before a goroutine is done warming go to the
// others and to the caller. busy, warm's argument, reports whether Each
// has calls waiting, so that warm can stop early.
func StartHelper(n int, spin time.Duration, warm func(busy func() bool)) *Helper {
	n = min(n, runtime.GOMAXPROCS(0)-1)
	if n < 1 {
		return nil
	}
	h := &Helper{}
	deadline := time.Now().Add(spin)
	for range n {
		go func() {
			if warm != nil {
				warm(h.busy)
			}
			h.poll(deadline)
		}()
	}
	return h
}

func (h *Helper) poll(deadline time.Time) {
	for !h.stop.Load() {
		if j := h.job.Load(); j != nil {
			j.run()
			h.job.CompareAndSwap(j, nil)
			continue
		}
		if time.Now().After(deadline) {
			return
		}
		runtime.Gosched()
	}
}

// run calls f for the indices not yet taken.
func (j *job) run() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.n {
			return
		}
		j.f(int(i))
		j.left.Add(-1)
	}
}

// Each calls f(i) for every i in [0, n), each once: on the calling
// goroutine and, while the Helper's goroutines still poll, on them too,
// each taking the next i. It returns when every call has returned. f
// must be safe for concurrent use. A nil or stopped Helper leaves every
// call to the caller. Each is not safe for concurrent use.
func (h *Helper) Each(n int, f func(i int)) {
	if n <= 0 {
		return
	}
	j := &job{f: f, n: int64(n)}
	j.left.Store(int64(n))
	if h != nil && n > 1 && !h.stop.Load() {
		h.job.Store(j)
	}
	j.run()
	// The Helper's goroutines may still be in their last calls.
	for j.left.Load() > 0 {
		runtime.Gosched()
	}
	if h != nil {
		h.job.CompareAndSwap(j, nil)
	}
}

// busy reports whether Each has handed out calls.
func (h *Helper) busy() bool { return h.job.Load() != nil }

// Stop ends the polling of the Helper's goroutines once their current
// calls, if any, return. A nil Helper's Stop does nothing.
func (h *Helper) Stop() {
	if h != nil {
		h.stop.Store(true)
	}
}
