package hetero

import (
	"fmt"
	"runtime"
	"time"

	"github.com/sparsetune/sparsetune/internal/par"
)

// Bandwidth is the result of the memory-bandwidth probe.
type Bandwidth struct {
	GBs     float64 `json:"gb_per_s"` // best triad rate, 10^9 bytes/s, STREAM's byte count
	Threads int     `json:"threads"`
	Bytes   int64   `json:"array_bytes"` // size of each of the three arrays
	Trials  int     `json:"trials"`
}

// DefaultProbeBytes is the size of each probe array: 3 x 64 MiB is well
// past the last-level cache of the machines sparsetune targets, so the
// triad runs from DRAM.
const DefaultProbeBytes = 64 << 20

// MemoryBandwidth measures the host's memory bandwidth with a STREAM-triad
// kernel, a[i] = b[i] + s·c[i] over float32 arrays of arrayBytes each
// (0 for DefaultProbeBytes), split among threads goroutines (0 for
// GOMAXPROCS), in trials runs, and reports the best run.
//
// Bytes are counted as STREAM does, 12 per float32 element (two reads, one
// write); the write-allocate read a cache may add is not counted. A kernel's
// GB/s set against this rate says how close it runs to what the memory can
// deliver.
func MemoryBandwidth(threads int, arrayBytes int64, trials int) (Bandwidth, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if arrayBytes <= 0 {
		arrayBytes = DefaultProbeBytes
	}
	if trials <= 0 {
		trials = 5
	}
	n := int(arrayBytes / 4)
	if n < threads {
		return Bandwidth{}, fmt.Errorf("bandwidth probe: %d bytes per array is too small for %d threads", arrayBytes, threads)
	}
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	// First touch from the goroutines that will use each part, so pages
	// are placed near them on NUMA machines.
	par.Range(n, threads, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			a[i], b[i], c[i] = 0, 1, 2
		}
	})
	best := time.Duration(1<<63 - 1)
	const s = 3
	for range trials {
		start := time.Now()
		par.Range(n, threads, func(_, lo, hi int) { triad(a[lo:hi], b[lo:hi], c[lo:hi], s) })
		best = min(best, time.Since(start))
	}
	// The result is read so the compiler cannot drop the work.
	if a[n-1] != 1+s*2 {
		return Bandwidth{}, fmt.Errorf("bandwidth probe: triad computed %v, expected %v", a[n-1], 1+s*2)
	}
	return Bandwidth{GBs: 12 * float64(n) / best.Seconds() / 1e9, Threads: threads, Bytes: int64(n) * 4, Trials: trials}, nil
}

func triad(a, b, c []float32, s float32) {
	b, c = b[:len(a)], c[:len(a)]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}
