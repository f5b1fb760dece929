package formats

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHiCOOByHand(t *testing.T) {
	// 4x4x2 with b = 1: block coordinates (i>>1, j>>1, 0), offsets the low
	// bits. ALTO order puts the 1-bit mode k first in level 0 and then i
	// before j, so blocks come in the order (0,0) (1,0) (0,1) (1,1), and
	// inside a block the offsets (i0, j0, k0) sort by k0 + 2 i0 + 4 j0.
	x := &COO{
		Dims: []int{4, 4, 2},
		Inds: [][]uint32{
			{0, 1, 2, 3, 0, 3, 2},
			{0, 1, 0, 0, 3, 3, 2},
			{0, 1, 1, 0, 0, 1, 0},
		},
		Vals: []float32{1, 2, 3, 4, 5, 6, 7},
	}
	orig := x.Clone()
	h, err := NewHiCOO(x, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !x.Equal(orig) {
		t.Fatal("NewHiCOO modified its input")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"BlockPtr", h.BlockPtr, []uint32{0, 2, 4, 5, 7}},
		{"BlockInds", h.BlockInds, [][]uint32{{0, 1, 0, 1}, {0, 0, 1, 1}, {0, 0, 0, 0}}},
		{"ElemInds", h.ElemInds, [][]uint8{{0, 1, 0, 1, 0, 0, 1}, {0, 1, 0, 0, 1, 0, 1}, {0, 1, 1, 0, 0, 0, 1}}},
		{"Vals", h.Vals, []float32{1, 2, 3, 4, 5, 7, 6}},
		{"NumBlocks", h.NumBlocks(), 4},
		{"MeanBlockNNZ", h.MeanBlockNNZ(), 7.0 / 4},
		{"Bytes", h.Bytes(), int64(4*5 + 4*3*4 + 3*7 + 4*7)},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	checkHiCOO(t, h, x)
}

// checkHiCOO checks the block structure of h, that it is in ALTO order, and
// that it round-trips to x.
func checkHiCOO(t *testing.T, h *HiCOO, x *COO) {
	t.Helper()
	nb := h.NumBlocks()
	if h.BlockPtr[0] != 0 || int(h.BlockPtr[nb]) != h.NNZ() {
		t.Fatalf("dims %v b %d: bad BlockPtr ends", x.Dims, h.BlockBits)
	}
	for blk := range nb {
		if h.BlockPtr[blk] >= h.BlockPtr[blk+1] {
			t.Fatalf("dims %v b %d: empty block %d", x.Dims, h.BlockBits, blk)
		}
		same := blk > 0
		for m := range h.Order() {
			same = same && h.BlockInds[m][blk] == h.BlockInds[m][blk-1]
		}
		if same {
			t.Fatalf("dims %v b %d: blocks %d and %d have the same coordinates", x.Dims, h.BlockBits, blk-1, blk)
		}
	}
	for m := range h.Order() {
		for _, e := range h.ElemInds[m] {
			if int(e) >= 1<<h.BlockBits {
				t.Fatalf("offset %d does not fit b = %d", e, h.BlockBits)
			}
		}
	}
	back := h.ToCOO()
	a, err := NewALTO(x, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(a.ToCOO()) {
		t.Fatalf("dims %v b %d: not in ALTO order", x.Dims, h.BlockBits)
	}
	back.Sort()
	if !back.Equal(sortedNatural(x)) {
		t.Fatalf("dims %v b %d: round trip differs", x.Dims, h.BlockBits)
	}
}

func TestHiCOORoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for order := 2; order <= 5; order++ {
		for trial := range 6 {
			x := randomFormatTensor(rng, order, trial == 5)
			for _, b := range []int{1, 2, 5, DefaultHiCOOBlockBits, MaxHiCOOBlockBits} {
				h, err := NewHiCOO(x, b)
				if err != nil {
					t.Fatalf("dims %v b %d: %v", x.Dims, b, err)
				}
				checkHiCOO(t, h, x)
			}
		}
	}
}

func TestHiCOOLargeParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := genCOO(rng, []int{3000, 500, 20000}, 200_000)
	h, err := NewHiCOO(x, DefaultHiCOOBlockBits)
	if err != nil {
		t.Fatal(err)
	}
	checkHiCOO(t, h, x)
}

func TestHiCOOEmptyAndErrors(t *testing.T) {
	empty, _ := NewCOO([]int{300, 1, 5}, 0)
	h, err := NewHiCOO(empty, 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumBlocks() != 0 || h.MeanBlockNNZ() != 0 || h.ToCOO().NNZ() != 0 {
		t.Fatalf("empty: %d blocks", h.NumBlocks())
	}
	bad := &COO{Dims: []int{2, 3}, Inds: [][]uint32{{2}, {0}}, Vals: []float32{1}}
	for _, tc := range []struct {
		x    *COO
		b    int
		want string
	}{
		{bad, 3, "exceeds dim"},
		{empty, 0, "block bits"},
		{empty, 9, "block bits"},
	} {
		if _, err := NewHiCOO(tc.x, tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("b %d: err = %v, want it to contain %q", tc.b, err, tc.want)
		}
	}
}

func TestHiCOORealTensors(t *testing.T) {
	for _, path := range realTensorFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			x := loadRealTensor(t, path)
			for _, b := range []int{3, DefaultHiCOOBlockBits} {
				h, err := NewHiCOO(x, b)
				if err != nil {
					t.Fatal(err)
				}
				back := h.ToCOO()
				back.Sort()
				if !back.Equal(x) {
					t.Fatalf("b %d: round trip differs", b)
				}
				if slices.Contains(h.BlockPtr[1:], 0) {
					t.Fatalf("b %d: empty block", b)
				}
			}
		})
	}
}

// BenchmarkNewHiCOO measures building a HiCOO with the default block size
// and reports its footprint and block fill.
func BenchmarkNewHiCOO(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		b.Run(bt.name, func(b *testing.B) {
			var h *HiCOO
			for b.Loop() {
				var err error
				if h, err = NewHiCOO(bt.x, DefaultHiCOOBlockBits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(h.BytesPerNNZ(), "bytes/nnz")
			b.ReportMetric(h.MeanBlockNNZ(), "nnz/block")
		})
	}
}
