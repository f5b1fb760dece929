package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The kernels run their per-thread parts on a pool of long-lived worker
// goroutines rather than starting goroutines per call: a go statement with
// arguments allocates its closure, and a plan's steady state must not
// allocate. A job is a plain value sent over a channel, so dispatching one
// costs no allocation. Workers never block inside a job, so callers that
// share the pool cannot deadlock: at worst their jobs queue.
//
// Waking a parked goroutine goes through the OS (a futex), which costs
// tens of microseconds on a virtual machine: as much as a whole kernel run
// on a 10^5-nonzero tensor. So, like an OpenMP runtime's active wait
// policy, a worker that has just finished a job polls the queue for
// spinWait before it parks, and a caller waiting for its parts polls their
// countdown for as long before it parks: a kernel run right after another
// (an iterative decomposition, a benchmark) never waits for a wake-up.

// spinWait is how long a worker, or a caller waiting for its parts, polls
// before it parks.
const spinWait = 100 * time.Microsecond

// partRunner runs part t of a parallel phase.
type partRunner interface{ runPart(t int) }

// partsDone counts down the parts of one phase that run on the pool.
type partsDone struct {
	wg   sync.WaitGroup
	left atomic.Int32
}

type poolJob struct {
	task partRunner
	t    int
	done *partsDone
}

var pool struct {
	mu      sync.Mutex
	workers int
	jobs    chan poolJob
}

// ensureWorkers makes sure at least n pool workers exist. Plans call it
// once when they are built, so Run never starts a goroutine.
func ensureWorkers(n int) {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.jobs == nil {
		pool.jobs = make(chan poolJob, 256)
	}
	for ; pool.workers < n; pool.workers++ {
		go poolWorker(pool.jobs)
	}
}

func poolWorker(jobs <-chan poolJob) {
	for {
		j, ok := nextJob(jobs)
		if !ok {
			return
		}
		j.task.runPart(j.t)
		j.done.left.Add(-1)
		j.done.wg.Done()
	}
}

// nextJob polls jobs for spinWait, yielding the processor between polls,
// then blocks on it.
func nextJob(jobs <-chan poolJob) (poolJob, bool) {
	deadline := time.Now().Add(spinWait)
	for {
		select {
		case j, ok := <-jobs:
			return j, ok
		default:
		}
		if time.Now().After(deadline) {
			j, ok := <-jobs
			return j, ok
		}
		runtime.Gosched()
	}
}

// parallelParts runs task.runPart(t) for t in [0, n): part 0 on the calling
// goroutine, the others on the pool, and returns when all are done. done
// must not be in use by anyone else.
func parallelParts(n int, task partRunner, done *partsDone) {
	if n <= 1 {
		task.runPart(0)
		return
	}
	done.wg.Add(n - 1)
	done.left.Store(int32(n - 1))
	for t := 1; t < n; t++ {
		pool.jobs <- poolJob{task: task, t: t, done: done}
	}
	task.runPart(0)
	deadline := time.Now().Add(spinWait)
	for done.left.Load() > 0 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	done.wg.Wait()
}
