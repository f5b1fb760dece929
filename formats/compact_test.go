package formats

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestCompact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []struct {
		name string
		dims []int
		nnz  int
		pick func(m, dim int) uint32 // index of a nonzero in mode m
	}{
		{"every index used", []int{4, 3, 2}, 200, func(_, dim int) uint32 { return uint32(rng.IntN(dim)) }},
		{"identifiers (radix-sorted ranks)", []int{MaxDim, 1 << 30, 7}, 500, func(m, dim int) uint32 {
			if m == 2 {
				return uint32(rng.IntN(dim))
			}
			return uint32(rng.IntN(40)) * uint32(dim/40)
		}},
		{"gaps (bitmap ranks)", []int{1000, 50, 9}, 300, func(_, dim int) uint32 { return uint32(rng.IntN(dim/3)) * 3 }},
		{"one nonzero", []int{10, 10, 10}, 1, func(_, dim int) uint32 { return uint32(dim - 1) }},
	}
	for _, tt := range tests {
		x, err := NewCOO(tt.dims, tt.nnz)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		idx := make([]uint32, len(tt.dims))
		for range tt.nnz {
			for m, d := range tt.dims {
				idx[m] = tt.pick(m, d)
			}
			x.Append(idx, rng.Float32())
		}
		c, orig, err := x.Compact()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		for m := range tt.dims {
			cm, om, err := x.CompactMode(m)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if !slices.Equal(om, orig[m]) || !slices.Equal(cm.Inds[m], c.Inds[m]) || cm.Dims[m] != c.Dims[m] {
				t.Errorf("%s: CompactMode(%d) differs from Compact's mode", tt.name, m)
			}
			for k := range tt.dims {
				if k != m && (cm.Dims[k] != x.Dims[k] || &cm.Inds[k][0] != &x.Inds[k][0]) {
					t.Errorf("%s: CompactMode(%d) changed or copied mode %d", tt.name, m, k)
				}
			}
			if err := cm.Validate(); err != nil {
				t.Errorf("%s: CompactMode(%d): %v", tt.name, m, err)
			}
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: compact copy invalid: %v", tt.name, err)
		}
		if !slices.Equal(c.Vals, x.Vals) {
			t.Errorf("%s: values changed", tt.name)
		}
		for m := range tt.dims {
			if c.Dims[m] != len(orig[m]) || c.Dims[m] != x.UsedIndices(m) {
				t.Errorf("%s mode %d: dim %d, %d originals, %d used", tt.name, m+1, c.Dims[m], len(orig[m]), x.UsedIndices(m))
			}
			if !slices.IsSorted(orig[m]) || len(slices.Compact(slices.Clone(orig[m]))) != len(orig[m]) {
				t.Errorf("%s mode %d: originals not strictly increasing", tt.name, m+1)
			}
			seen := make([]bool, c.Dims[m])
			for k, j := range c.Inds[m] {
				if orig[m][j] != x.Inds[m][k] {
					t.Fatalf("%s mode %d nonzero %d: new index %d maps to %d, was %d", tt.name, m+1, k, j, orig[m][j], x.Inds[m][k])
				}
				seen[j] = true
			}
			if slices.Contains(seen, false) {
				t.Errorf("%s mode %d: a new index no nonzero uses", tt.name, m+1)
			}
		}
	}
}

func TestCompactKeepsUsedDims(t *testing.T) {
	x, _ := NewCOO([]int{3, 3}, 3)
	for i := range uint32(3) {
		x.Append([]uint32{i, 2 - i}, 1)
	}
	c, _, err := x.Compact()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Dims, x.Dims) || !c.Equal(x) {
		t.Errorf("a tensor using every index changed: %v -> %v", x.Dims, c.Dims)
	}
}

func TestCompactRefusesIndexPastDim(t *testing.T) {
	x := &COO{Dims: []int{4, 4}, Inds: [][]uint32{{0, 1}, {2, 4}}, Vals: []float32{1, 2}}
	if _, _, err := x.Compact(); err == nil || !strings.Contains(err.Error(), "nonzero 1 has mode-2 index 4, not below the dim 4") {
		t.Errorf("Compact: %v", err)
	}
	if _, _, err := x.CompactMode(1); err == nil {
		t.Error("CompactMode of the bad mode succeeded")
	}
}
