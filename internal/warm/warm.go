package warm

import (
	"os"
	"sync"
	"unsafe"
)

// The sizes of buffer Give keeps. Below MinGift, what a decision takes
// would soon run past the end. Above MaxGift, the buffer would pin too
// much: every slice lent out keeps the whole buffer it was cut from
// alive, so a summary kept for later keeps up to MaxGift with it. A
// fresh process's decision on 1.5·10^6 nonzeros took about 100 KiB (its
// sample's positions and indices, the tables counting them), 190 KiB
// with a graph and the network's buffers; one on 7.5·10^6 nonzeros of an
// order-4 tensor 260 KiB, and every mode's 290 KiB. The text reader's
// largest block under MaxGift is 1 MiB.
const (
	MinGift = 64 << 10
	MaxGift = 2 << 20
)

// MaxLentGifts is how many gifts slices are cut from in a process's life;
// Give refuses more. It bounds what the pool can pin to MaxLentGifts ×
// MaxGift bytes whatever slices are kept: a training run keeps the graph
// of each of thousands of tensors it reads, and a graph cut from each
// reader's gift would keep every gift alive. The pool is for a process's
// first decisions anyway: after them the heap has pages the collector
// frees and reuses.
const MaxLentGifts = 4

// pool is the memory given and not yet lent.
var pool struct {
	sync.Mutex
	free  []byte
	lent  bool // a slice was cut from the gift free is the rest of
	gifts int  // gifts slices were cut from
}

// Give hands b to the pool, if it holds MinGift to MaxGift bytes and
// more than the pool has left. Every byte of b must have been written or
// read by this process (so that its pages are in), and the caller must
// not use b again: its bytes will be overwritten by whoever takes them.
// What a slice lent from b pins is b's whole allocation, which cap(b)
// measures from b on: give a buffer, not a small part of a large one.
//
// Once slices have been cut from MaxLentGifts gifts, Give keeps no more.
func Give(b []byte) {
	if len(b) < MinGift || cap(b) > MaxGift {
		return
	}
	pool.Lock()
	if len(b) > len(pool.free) && pool.gifts < MaxLentGifts {
		pool.free, pool.lent = b, false
	}
	pool.Unlock()
}

// Fill makes sure the pool holds at least n bytes (at most MaxGift) that
// this process has written: when it holds fewer, Fill writes a fresh
// buffer of n bytes, a page at a time, and gives it. stop, when not nil,
// is asked after every fillStride pages; when it reports true Fill gives
// what it has written so far, if that is at least MinGift, and returns.
//
// Why: where no reader gave the pool a buffer (a .stb file is read
// straight into the tensor's arrays), every buffer a decision takes is
// fresh memory, a page fault per page on its first write, on the
// decision's time. A goroutine that would otherwise wait (model's Warm,
// while the model loads) pays them ahead. Memory a reader gave costs
// nothing; this costs the faults, on a core that was idle.
func Fill(n int, stop func() bool) {
	n = min(n, MaxGift)
	if n < MinGift || Free() >= n {
		return
	}
	b := make([]byte, n)
	page := os.Getpagesize()
	done := 0
	for done < n {
		end := min(done+fillStride*page, n)
		for i := done; i < end; i += page {
			b[i] = 0
		}
		done = end
		if done < n && stop != nil && stop() {
			break
		}
	}
	Give(b[:done:done])
}

// fillStride is how many pages Fill writes between two asks of stop:
// 16 pages cost 25-300 µs on the VMs measured (docs/model.md, "Where a
// fresh page's cost lies").
const fillStride = 16

// Reset empties the pool and forgets the gifts lent from, as in a new
// process. Slices already lent stay valid. It is for tests.
func Reset() {
	pool.Lock()
	pool.free, pool.lent, pool.gifts = nil, false, 0
	pool.Unlock()
}

// Free returns how many bytes the pool can still lend.
func Free() int {
	pool.Lock()
	defer pool.Unlock()
	return len(pool.free)
}

// take returns n bytes aligned to 8 from the pool, cleared, or nil if it
// has fewer. The bytes are cleared after the lock is let go: they are the
// caller's alone by then, and concurrent takers need not wait on it.
func take(n int) unsafe.Pointer {
	if n <= 0 {
		return nil
	}
	pool.Lock()
	b := pool.free
	// Align to 8 bytes, the widest element lent.
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 7)
	if len(b) < skip+n {
		pool.Unlock()
		return nil
	}
	part := b[skip : skip+n : skip+n]
	pool.free = b[skip+n:]
	if !pool.lent {
		pool.lent = true
		pool.gifts++
	}
	pool.Unlock()
	clear(part)
	return unsafe.Pointer(unsafe.SliceData(part))
}

// number is what the pool lends: plain numbers, no wider than 8 bytes,
// with nothing the collector must find in them.
type number interface{ uint32 | uint64 | float32 }

// lend returns n zeroed elements, from the pool when it has room, else
// freshly allocated.
func lend[T number](n int) []T {
	var zero T
	if p := take(int(unsafe.Sizeof(zero)) * n); p != nil {
		return unsafe.Slice((*T)(p), n)
	}
	return make([]T, n)
}

// Uint64s returns n zeroed uint64s, from the pool when it has room, else
// freshly allocated.
func Uint64s(n int) []uint64 { return lend[uint64](n) }

// Uint32s returns n zeroed uint32s, from the pool when it has room, else
// freshly allocated.
func Uint32s(n int) []uint32 { return lend[uint32](n) }

// Float32s returns n zeroed float32s, from the pool when it has room,
// else freshly allocated.
func Float32s(n int) []float32 { return lend[float32](n) }
