package mpi

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Without the mpi tag, Init says how to build the MPI binary.
func TestNotBuilt(t *testing.T) {
	if Built {
		t.Skip("built with MPI")
	}
	_, err := Init()
	if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "-tags mpi") {
		t.Errorf("Init without MPI: %v", err)
	}
	if err := Allreduce(&Comm{}, []float32{1}, []float32{0}, Sum); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Allreduce without MPI: %v", err)
	}
}

func TestLaunched(t *testing.T) {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"} {
		t.Setenv(v, "")
	}
	if Launched() {
		t.Error("Launched with no launcher variable set")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	if !Launched() {
		t.Error("not Launched under Open MPI's variables")
	}
}

func TestDisplacements(t *testing.T) {
	// w32 is 2^32 where int has 64 bits (and 1 elsewhere, where that case
	// is left out): written as 1 << 32 it would not compile for 32-bit
	// targets.
	const w32 = 1 << (strconv.IntSize - 32)
	type testCase struct {
		counts       []int
		ranks, total int
		displ        []int32
		bad          bool
	}
	cases := []testCase{
		{counts: []int{2, 0, 3}, ranks: 3, total: 5, displ: []int32{0, 2, 2}},
		{counts: []int{2, 3}, ranks: 3, total: 5, bad: true},
		{counts: []int{2, -1, 3}, ranks: 3, total: 5, bad: true},
		{counts: []int{2, 4}, ranks: 2, total: 5, bad: true},
	}
	if strconv.IntSize == 64 {
		// A count past MPI's int32 displacements.
		cases = append(cases, testCase{counts: []int{w32 / 2, 0}, ranks: 2, total: w32, bad: true})
	}
	for _, c := range cases {
		_, displ, err := displacements("test", c.counts, c.ranks, c.total)
		if (err != nil) != c.bad || (!c.bad && !slices.Equal(displ, c.displ)) {
			t.Errorf("displacements(%v, %d, %d) = %v, %v", c.counts, c.ranks, c.total, displ, err)
		}
	}
}
