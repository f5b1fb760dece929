package graphenc

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// TestLowerByHand checks the mapping matrix of TestEncodeByHand's tensor:
// SpTTM along mode 2 projects onto mode 3 (rows) by mode 2 (columns);
// MTTKRP along mode 1 onto mode 1 by mode 2, its largest other mode.
func TestLowerByHand(t *testing.T) {
	x := coo(t, []int{3, 4, 2}, [][]uint32{{0, 0, 0}, {1, 0, 0}, {2, 3, 1}, {0, 3, 1}, {1, 1, 0}})
	tests := []struct {
		op         hetero.Op
		mode       int
		rows, cols int
		want       map[[2]int]uint64
	}{
		{hetero.SpTTM, 1, 2, 4, map[[2]int]uint64{{0, 0}: 2, {0, 1}: 1, {1, 3}: 2}},
		{hetero.MTTKRP, 0, 3, 4, map[[2]int]uint64{{0, 0}: 1, {0, 3}: 1, {1, 0}: 1, {1, 1}: 1, {2, 3}: 1}},
	}
	for _, tc := range tests {
		m, err := Lower(x, tc.op, tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if m.Rows != tc.rows || m.Cols != tc.cols || len(m.Count) != len(tc.want) {
			t.Fatalf("%v mode %d: %d x %d with %d entries", tc.op, tc.mode+1, m.Rows, m.Cols, len(m.Count))
		}
		for a := range m.Rows {
			for b := range m.Cols {
				if got := m.At(a, b); got != tc.want[[2]int{a, b}] {
					t.Errorf("%v mode %d: (%d,%d) = %d, want %d", tc.op, tc.mode+1, a, b, got, tc.want[[2]int{a, b}])
				}
			}
		}
	}
}

// TestLowerInvariants: the mapping matrix is the naive count, and neither
// permuting the slices (the projected-out modes) nor the nonzeros changes
// it.
func TestLowerInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dims := range [][]int{{40, 30}, {50, 60, 20}, {30, 20, 10, 15}} {
		x := randomTensor(rng, dims, 5000)
		for _, op := range hetero.Ops {
			for mode := range len(dims) {
				m, err := Lower(x, op, mode)
				if err != nil {
					t.Fatal(err)
				}
				want := naiveMapping(x, m.Shape)
				if len(want) != len(m.Count) {
					t.Fatalf("%v %v mode %d: %d entries, want %d", dims, op, mode+1, len(m.Count), len(want))
				}
				for pos, c := range want {
					if got := m.At(int(pos[0]), int(pos[1])); got != c {
						t.Fatalf("%v %v mode %d: %v = %d, want %d", dims, op, mode+1, pos, got, c)
					}
				}
				y := x.Clone()
				for md := range y.Order() {
					if md == m.Shape.Rows || md == m.Shape.Cols {
						continue
					}
					perm := rng.Perm(dims[md])
					for k, i := range y.Inds[md] {
						y.Inds[md][k] = uint32(perm[i])
					}
				}
				sh := rng.Perm(y.NNZ())
				for md := range y.Inds {
					ind := make([]uint32, len(sh))
					for k, p := range sh {
						ind[k] = y.Inds[md][p]
					}
					y.Inds[md] = ind
				}
				m2, err := Lower(y, op, mode)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(m.RowPtr, m2.RowPtr) || !slices.Equal(m.ColInd, m2.ColInd) || !slices.Equal(m.Count, m2.Count) {
					t.Errorf("%v %v mode %d: permuting slices and nonzeros changed the mapping matrix", dims, op, mode+1)
				}
			}
		}
	}
}

func TestLowerErrors(t *testing.T) {
	x := coo(t, []int{3, 4, 2}, [][]uint32{{0, 0, 0}, {1, 0, 0}})
	bad := x.Clone()
	bad.Inds[2][1] = 5
	vec := &formats.COO{Dims: []int{4}, Inds: [][]uint32{{1}}, Vals: []float32{1}}
	for _, tc := range []struct {
		x    *formats.COO
		op   hetero.Op
		mode int
		want string
	}{
		{x, hetero.SpTTM, 3, "mode 4 out of range"},
		{x, hetero.Op(0), 0, "unknown op"},
		{bad, hetero.SpTTM, 0, "nonzero 2 has an index beyond the dims"},
		{vec, hetero.SpTTM, 0, "order-1 tensor"},
	} {
		if _, err := Lower(tc.x, tc.op, tc.mode); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
}
