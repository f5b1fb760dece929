//go:build mpi

package mpi

/*
#cgo pkg-config: ompi
#include <mpi.h>

// Open MPI's handles are macros over addresses of globals, which cgo
// cannot evaluate: small functions return them.
static MPI_Comm world_comm(void) { return MPI_COMM_WORLD; }
// MPI_IN_PLACE is the address 1: it must never be held in a Go pointer,
// which the garbage collector and stack copying check, so the in-place
// call passes it on the C side.
static int allreduce_in_place(void *buf, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, t, op, c);
}
static MPI_Datatype data_type(int k) {
	switch (k) {
	case 1: return MPI_FLOAT;
	case 2: return MPI_DOUBLE;
	case 3: return MPI_UINT32_T;
	case 4: return MPI_UINT64_T;
	}
	return MPI_DATATYPE_NULL;
}
static MPI_Op reduce_op(int k) {
	switch (k) {
	case 1: return MPI_SUM;
	case 2: return MPI_MAX;
	case 3: return MPI_MIN;
	}
	return MPI_OP_NULL;
}
static int init_serialized(int *provided) {
	return MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
}
static int errors_return(MPI_Comm c) {
	return MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// Built reports whether the binary links MPI.
const Built = true

var (
	// mu serialises every MPI call (MPI_THREAD_SERIALIZED).
	mu        sync.Mutex
	initOnce  sync.Once
	world     *Comm
	initErr   error
	finalized bool
)

// Comm is a communicator: a group of ranks that take part in the same
// collectives.
type Comm struct {
	c          C.MPI_Comm
	rank, size int
}

// Init initialises MPI, once per process, and returns the communicator of
// every rank (MPI_COMM_WORLD). Without a launcher it is a job of one.
func Init() (*Comm, error) {
	initOnce.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		var provided C.int
		if rc := C.init_serialized(&provided); rc != C.MPI_SUCCESS {
			initErr = fmt.Errorf("mpi: init: %s", errorString(rc))
			return
		}
		if provided < C.MPI_THREAD_SERIALIZED {
			initErr = fmt.Errorf("mpi: init: the library gives thread level %d, sparsetune needs MPI_THREAD_SERIALIZED (%d)", int(provided), int(C.MPI_THREAD_SERIALIZED))
			return
		}
		world, initErr = newComm(C.world_comm())
	})
	return world, initErr
}

func newComm(c C.MPI_Comm) (*Comm, error) {
	// Errors come back as codes, to be returned, not as an abort of the
	// whole job from inside the library.
	if rc := C.errors_return(c); rc != C.MPI_SUCCESS {
		return nil, fmt.Errorf("mpi: set the error handler: %s", errorString(rc))
	}
	var rank, size C.int
	if rc := C.MPI_Comm_rank(c, &rank); rc != C.MPI_SUCCESS {
		return nil, fmt.Errorf("mpi: rank: %s", errorString(rc))
	}
	if rc := C.MPI_Comm_size(c, &size); rc != C.MPI_SUCCESS {
		return nil, fmt.Errorf("mpi: size: %s", errorString(rc))
	}
	return &Comm{c: c, rank: int(rank), size: int(size)}, nil
}

// Finalize shuts MPI down; no call may follow. It is a no-op before Init
// and after the first call.
func Finalize() error {
	mu.Lock()
	defer mu.Unlock()
	if world == nil || finalized {
		return nil
	}
	finalized = true
	return check("finalize", C.MPI_Finalize())
}

// Rank returns this process's rank in c, from 0.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in c.
func (c *Comm) Size() int { return c.size }

// Barrier returns when every rank of c has called it.
func (c *Comm) Barrier() error {
	mu.Lock()
	defer mu.Unlock()
	return check("barrier", C.MPI_Barrier(c.c))
}

// Abort ends every rank of the job with the exit code; it does not
// return.
func (c *Comm) Abort(code int) {
	mu.Lock()
	C.MPI_Abort(c.c, C.int(code))
	mu.Unlock()
}

// Split returns the communicator of the ranks of c that pass the same
// color, ordered by key (then by rank in c).
func (c *Comm) Split(color, key int) (*Comm, error) {
	mu.Lock()
	defer mu.Unlock()
	var out C.MPI_Comm
	if err := check("split", C.MPI_Comm_split(c.c, C.int(color), C.int(key), &out)); err != nil {
		return nil, err
	}
	return newComm(out)
}

// Allreduce combines send over every rank with op into recv, on every
// rank. send and recv have equal lengths; they may be the same slice.
func Allreduce[T Number](c *Comm, send, recv []T, op Op) error {
	n, err := count("allreduce", len(send))
	if err != nil {
		return err
	}
	if len(recv) != len(send) {
		return fmt.Errorf("mpi: allreduce: send has %d elements, recv %d", len(send), len(recv))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(send) > 0 && unsafe.SliceData(send) == unsafe.SliceData(recv) {
		return check("allreduce", C.allreduce_in_place(ptr(recv), C.int(n), dataType[T](), C.reduce_op(C.int(op)), c.c))
	}
	return check("allreduce", C.MPI_Allreduce(ptr(send), ptr(recv), C.int(n), dataType[T](), C.reduce_op(C.int(op)), c.c))
}

// ReduceScatter combines send over every rank with op and leaves block r
// of the result, counts[r] elements, in recv on rank r. send holds the
// sum of counts elements.
func ReduceScatter[T Number](c *Comm, send, recv []T, counts []int, op Op) error {
	cnt, _, err := displacements("reduce-scatter", counts, c.size, len(send))
	if err != nil {
		return err
	}
	if len(recv) < counts[c.rank] {
		return fmt.Errorf("mpi: reduce-scatter: recv holds %d elements, rank %d receives %d", len(recv), c.rank, counts[c.rank])
	}
	mu.Lock()
	defer mu.Unlock()
	return check("reduce-scatter", C.MPI_Reduce_scatter(ptr(send), ptr(recv), (*C.int)(unsafe.Pointer(&cnt[0])), dataType[T](), C.reduce_op(C.int(op)), c.c))
}

// Allgather concatenates every rank's send, in rank order, into recv on
// every rank; recv holds Size()·len(send) elements.
func Allgather[T Number](c *Comm, send, recv []T) error {
	n, err := count("allgather", len(send))
	if err != nil {
		return err
	}
	if len(recv) != len(send)*c.size {
		return fmt.Errorf("mpi: allgather: recv holds %d elements, %d ranks send %d each", len(recv), c.size, len(send))
	}
	mu.Lock()
	defer mu.Unlock()
	return check("allgather", C.MPI_Allgather(ptr(send), C.int(n), dataType[T](), ptr(recv), C.int(n), dataType[T](), c.c))
}

// Allgatherv concatenates every rank's send, in rank order, into recv on
// every rank; rank r sends counts[r] elements.
func Allgatherv[T Number](c *Comm, send, recv []T, counts []int) error {
	cnt, displ, err := displacements("allgatherv", counts, c.size, len(recv))
	if err != nil {
		return err
	}
	if len(send) != counts[c.rank] {
		return fmt.Errorf("mpi: allgatherv: rank %d sends %d elements, counts say %d", c.rank, len(send), counts[c.rank])
	}
	mu.Lock()
	defer mu.Unlock()
	return check("allgatherv", C.MPI_Allgatherv(ptr(send), C.int(len(send)), dataType[T](), ptr(recv),
		(*C.int)(unsafe.Pointer(&cnt[0])), (*C.int)(unsafe.Pointer(&displ[0])), dataType[T](), c.c))
}

// Alltoallv sends sendCounts[r] consecutive elements of send to each rank
// r, in rank order, and receives recvCounts[r] elements from each rank r
// into recv, in rank order.
func Alltoallv[T Number](c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	scnt, sdispl, err := displacements("alltoallv send", sendCounts, c.size, len(send))
	if err != nil {
		return err
	}
	rcnt, rdispl, err := displacements("alltoallv recv", recvCounts, c.size, len(recv))
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return check("alltoallv", C.MPI_Alltoallv(ptr(send), (*C.int)(unsafe.Pointer(&scnt[0])), (*C.int)(unsafe.Pointer(&sdispl[0])), dataType[T](),
		ptr(recv), (*C.int)(unsafe.Pointer(&rcnt[0])), (*C.int)(unsafe.Pointer(&rdispl[0])), dataType[T](), c.c))
}

// Bcast copies buf on rank root into buf on every other rank.
func Bcast[T Number](c *Comm, buf []T, root int) error {
	n, err := count("bcast", len(buf))
	if err != nil {
		return err
	}
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: bcast: root %d, expected 0 to %d", root, c.size-1)
	}
	mu.Lock()
	defer mu.Unlock()
	return check("bcast", C.MPI_Bcast(ptr(buf), C.int(n), dataType[T](), C.int(root), c.c))
}

// dataType returns MPI's type for T.
func dataType[T Number]() C.MPI_Datatype {
	var z T
	switch any(z).(type) {
	case float32:
		return C.data_type(1)
	case float64:
		return C.data_type(2)
	case uint32:
		return C.data_type(3)
	default:
		return C.data_type(4)
	}
}

// ptr returns the address of s's data (nil when empty).
func ptr[T Number](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

func check(what string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	return fmt.Errorf("mpi: %s: %s", what, errorString(rc))
}

func errorString(rc C.int) string {
	var buf [C.MPI_MAX_ERROR_STRING]C.char
	var n C.int
	if C.MPI_Error_string(rc, &buf[0], &n) != C.MPI_SUCCESS {
		return fmt.Sprintf("error %d", int(rc))
	}
	return C.GoStringN(&buf[0], n)
}
