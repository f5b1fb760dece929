package mpi

import (
	"errors"
	"fmt"
	"math"
	"os"
)

// Number is an element type the collectives send.
type Number interface {
	float32 | float64 | uint32 | uint64
}

// Op is a reduction.
type Op int

const (
	Sum Op = iota + 1
	Max
	Min
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ErrNotBuilt is what Init and the collectives return in a binary built
// without the mpi tag.
var ErrNotBuilt = errors.New("this binary is built without MPI: build it with `go build -tags mpi ./cmd/sparsetune` (needs Open MPI: apt-get install libopenmpi-dev openmpi-bin) and run it under mpirun")

// Launched reports whether the process was started by an MPI launcher
// (mpirun, mpiexec, srun with PMI): such a process is one rank of a job,
// whatever the build.
func Launched() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// displacements checks counts (one per rank, non-negative, summing to at
// most total) and returns their prefix sums, in MPI's int.
func displacements(what string, counts []int, ranks, total int) (cnt, displ []int32, err error) {
	if len(counts) != ranks {
		return nil, nil, fmt.Errorf("mpi: %s: %d counts for %d ranks", what, len(counts), ranks)
	}
	cnt, displ = make([]int32, ranks), make([]int32, ranks)
	at := 0
	for r, c := range counts {
		if c < 0 || c > math.MaxInt32 || at > math.MaxInt32 {
			return nil, nil, fmt.Errorf("mpi: %s: count %d for rank %d out of MPI's int range", what, c, r)
		}
		cnt[r], displ[r] = int32(c), int32(at)
		at += c
	}
	if at > total {
		return nil, nil, fmt.Errorf("mpi: %s: counts sum to %d, the buffer holds %d", what, at, total)
	}
	return cnt, displ, nil
}

// count checks a buffer length against MPI's int.
func count(what string, n int) (int32, error) {
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("mpi: %s: %d elements, more than MPI's int counts", what, n)
	}
	return int32(n), nil
}
