package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/sysmem"
)

// A plan whose output or operands are sized past memory by the dims fails
// with an error, before it allocates them.
func TestPlanRefusesDimsPastMemory(t *testing.T) {
	// Where the available memory is unknown (outside Linux) only sizes past
	// the address space are refused, and this one is within it.
	if avail, ok := sysmem.Available(); !ok || avail > 1<<40 {
		t.Skipf("needs a Linux machine with less than 1 TiB available (have %d, known %v)", avail, ok)
	}
	x, err := formats.NewCOO([]int{formats.MaxDim, formats.MaxDim, 4}, 50)
	if err != nil {
		t.Fatal(err)
	}
	for k := range uint32(50) {
		x.Append([]uint32{k * 80000000, formats.MaxDim - 1 - k, k % 4}, 1)
	}
	e, err := New([]hetero.Device{hetero.NewCPU(0)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const rank = 1 << 20 // past a 32-bit address space too
	for _, plan := range []func() (*Plan, error){
		func() (*Plan, error) { return e.PlanMTTKRP(context.Background(), x, 0, rank) },
		func() (*Plan, error) { return e.PlanTTM(context.Background(), x, 1, rank) },
	} {
		p, err := plan()
		if err == nil {
			p.Close()
			t.Fatal("planned on dims past memory")
		}
		if !strings.Contains(err.Error(), "more than") || !strings.Contains(err.Error(), "--compact") {
			t.Errorf("error %q does not say what did not fit and how to shrink it", err)
		}
	}
}
