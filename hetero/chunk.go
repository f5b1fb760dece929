package hetero

import (
	"fmt"
	"math"
	"sync/atomic"
)

// The dynamic strategy cuts the slices, largest first, into chunks of
// about ChunkNNZ nonzeros that the CPU and the accelerator pull as they
// go. The accelerator double-buffers: while its kernel runs on chunk k,
// chunk k+1 is copied into the other buffer. Chunks come largest first
// and are about equal, so chunk k+1 is no larger than chunk k and its copy
// hides behind chunk k's kernel whenever the link moves a nonzero faster
// than the kernel processes one (transfer ≤ compute per nonzero); when it
// does not, no chunk size hides it and the accelerator runs at the link's
// pace. What the chunk size decides is the rest:
//
//   - the pipeline's ends are not overlapped: the first chunk's copy runs
//     before any kernel and the last chunk's kernel after every copy, and
//     at the end one device may wait for the other's last chunk. Together
//     that costs about one chunk's time, (compute + transfer)·C;
//   - every chunk costs a fixed overhead o (a kernel launch, a copy's
//     latency, the queue): n = T/C chunks cost n·o.
//
// With T nonzeros the sum (compute + transfer)·T/n + n·o is least at
//
//	n* = √(T·(compute + transfer)/o)
//
// chunks; ChunkNNZ clamps n* to [MinChunks, MaxChunks] and returns
// ⌈T/n*⌉ nonzeros per chunk.

// DefaultChunkOverhead is the fixed cost o of one chunk on the
// accelerator, in seconds: about a kernel launch plus a copy's latency on
// a discrete GPU (tens of microseconds each).
const DefaultChunkOverhead = 50e-6

// MinChunks and MaxChunks bound the number of chunks of the dynamic
// strategy: at least enough for both devices to pull some and for a copy
// to overlap a kernel, at most so many that the queue's bookkeeping shows.
const (
	MinChunks = 4
	MaxChunks = 4096
)

// ChunkNNZ returns the target nonzeros per chunk for total nonzeros,
// given the accelerator's compute (kernel and memory) and transfer
// seconds per nonzero and its overhead per chunk in seconds (0 or less
// for DefaultChunkOverhead), by the rule above. It is at least 1.
func ChunkNNZ(total int64, compute, transfer, overhead float64) int64 {
	if total <= 0 {
		return 1
	}
	if !(overhead > 0) {
		overhead = DefaultChunkOverhead
	}
	perNNZ := compute + transfer
	if !(perNNZ > 0) || math.IsInf(perNNZ, 0) {
		perNNZ = 0
	}
	n := math.Sqrt(float64(total) * perNNZ / overhead)
	n = math.Round(min(max(n, MinChunks), MaxChunks))
	return max(int64(math.Ceil(float64(total)/n)), 1)
}

// Chunk is a run of slices handed out together.
type Chunk struct {
	Index  int   // position in the queue, 0 first
	Slices []int // slice ids, largest first; shared, not to be changed
	NNZ    int64
}

// ChunkQueue hands out chunks of slices, largest first, each exactly once,
// to any number of goroutines.
type ChunkQueue struct {
	chunks []Chunk
	next   atomic.Int64
}

// NewChunkQueue sorts the slices by nonzeros, largest first (ties by id),
// and cuts them into chunks: slices are added to a chunk until it holds at
// least chunkNNZ nonzeros (a slice that large is a chunk of its own;
// chunkNNZ ≤ 0 makes every slice one). Empty slices go into the last
// chunk.
func NewChunkQueue(sliceNNZ []int64, chunkNNZ int64) (*ChunkQueue, error) {
	for i, n := range sliceNNZ {
		if n < 0 {
			return nil, fmt.Errorf("chunk queue: slice %d has %d nonzeros", i, n)
		}
	}
	q := &ChunkQueue{}
	var cur Chunk
	for _, i := range bySize(sliceNNZ) {
		if sliceNNZ[i] == 0 && len(q.chunks) > 0 && len(cur.Slices) == 0 {
			// Only empty slices are left: they join the last chunk.
			last := &q.chunks[len(q.chunks)-1]
			last.Slices = append(last.Slices, i)
			continue
		}
		cur.Slices = append(cur.Slices, i)
		cur.NNZ += sliceNNZ[i]
		if cur.NNZ >= chunkNNZ && cur.NNZ > 0 {
			cur.Index = len(q.chunks)
			q.chunks = append(q.chunks, cur)
			cur = Chunk{}
		}
	}
	if len(cur.Slices) > 0 {
		cur.Index = len(q.chunks)
		q.chunks = append(q.chunks, cur)
	}
	return q, nil
}

// Next returns the next chunk, or false when all have been handed out.
func (q *ChunkQueue) Next() (Chunk, bool) {
	i := q.next.Add(1) - 1
	if i >= int64(len(q.chunks)) {
		return Chunk{}, false
	}
	return q.chunks[i], true
}

// Len returns the number of chunks in all.
func (q *ChunkQueue) Len() int { return len(q.chunks) }
