package dist

import (
	"slices"
	"testing"
)

func TestGrid(t *testing.T) {
	for _, c := range []struct {
		dims []int
		P    int
		want []int
	}{
		{[]int{100, 100, 100}, 1, []int{1, 1, 1}},
		{[]int{100, 50, 10}, 2, []int{2, 1, 1}},
		{[]int{100, 50, 10}, 4, []int{4, 1, 1}}, // ties go to the lower mode
		{[]int{100, 60, 10}, 4, []int{2, 2, 1}},
		{[]int{100, 100, 16}, 8, []int{4, 2, 1}},
		{[]int{1000, 10, 10}, 6, []int{6, 1, 1}},
		{[]int{7, 7, 7}, 3, []int{3, 1, 1}},
	} {
		got, err := Grid(c.dims, c.P)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Grid(%v, %d) = %v, %v; want %v", c.dims, c.P, got, err, c.want)
		}
	}
	if _, err := Grid([]int{2, 2, 2}, 27); err == nil {
		t.Error("27 ranks over a 2x2x2 tensor accepted")
	}
	if _, err := Grid([]int{2, 2, 2}, 0); err == nil {
		t.Error("0 ranks accepted")
	}
}

func TestPartition(t *testing.T) {
	counts := [][]int64{
		{10, 10, 10, 10, 10, 10, 10, 10},
		{100, 0, 0, 0, 1, 1},
		{0, 0, 5},
	}
	p, err := NewPartition([]int{4, 3, 1}, counts)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 2, 4, 6, 8}, {0, 1, 2, 6}, {0, 3}}
	for n := range want {
		if !slices.Equal(p.Bounds[n], want[n]) {
			t.Errorf("mode %d bounds %v, want %v", n+1, p.Bounds[n], want[n])
		}
	}
	for n, b := range p.Bounds {
		for l := range len(b) - 1 {
			if b[l+1] <= b[l] {
				t.Errorf("mode %d: empty layer %d in %v", n+1, l, b)
			}
		}
	}
	// Every cell maps to its rank and back; a coordinate's owner is the
	// cell of its layers.
	for r := range 12 {
		if got := p.Rank(p.Coords(r)); got != r {
			t.Errorf("Rank(Coords(%d)) = %d", r, got)
		}
	}
	if got := p.Owner([]uint32{5, 3, 2}); got != p.Rank([]int{2, 2, 0}) {
		t.Errorf("owner of (5, 3, 2) = %d (cell %v)", got, p.Coords(got))
	}
	if _, err := NewPartition([]int{9, 1, 1}, counts); err == nil {
		t.Error("9 layers over a mode of 8 indices accepted")
	}
}
