package kernels

import "sync"

// The kernels run their per-thread parts on a pool of long-lived worker
// goroutines rather than starting goroutines per call: a go statement with
// arguments allocates its closure, and a plan's steady state must not
// allocate. A job is a plain value sent over a channel, so dispatching one
// costs no allocation. Workers never block inside a job, so callers that
// share the pool cannot deadlock: at worst their jobs queue.

// partRunner runs part t of a parallel phase.
type partRunner interface{ runPart(t int) }

type poolJob struct {
	task partRunner
	t    int
	wg   *sync.WaitGroup
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
	for j := range jobs {
		j.task.runPart(j.t)
		j.wg.Done()
	}
}

// parallelParts runs task.runPart(t) for t in [0, n): part 0 on the calling
// goroutine, the others on the pool, and returns when all are done. wg must
// not be in use by anyone else.
func parallelParts(n int, task partRunner, wg *sync.WaitGroup) {
	if n <= 1 {
		task.runPart(0)
		return
	}
	wg.Add(n - 1)
	for t := 1; t < n; t++ {
		pool.jobs <- poolJob{task: task, t: t, wg: wg}
	}
	task.runPart(0)
	wg.Wait()
}
