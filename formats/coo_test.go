package formats

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// genCOO returns a tensor with the given dims and nnz uniformly random
// coordinates (duplicates possible) and random values.
func genCOO(rng *rand.Rand, dims []int, nnz int) *COO {
	t, err := NewCOO(dims, nnz)
	if err != nil {
		panic(err)
	}
	idx := make([]uint32, len(dims))
	for range nnz {
		for m, d := range dims {
			idx[m] = uint32(rng.Uint64N(uint64(d)))
		}
		t.Append(idx, float32(rng.NormFloat64()))
	}
	return t
}

// maxDimText and maxNNZText are the limits as the messages that name them
// write them: where int has 32 bits they are 2^31-1, not 2^32 and 2^32-1.
var (
	maxDimText = strconv.Itoa(MaxDim)
	maxNNZText = strconv.Itoa(MaxNNZ)
)

func TestCheckDims(t *testing.T) {
	tests := []struct {
		dims []int
		want string // substring of the error, "" for none
	}{
		{[]int{3, 4}, ""},
		{[]int{1, 1, 1}, ""},
		{[]int{MaxDim, MaxDim, MaxDim, MaxDim}, ""},
		{[]int{5}, "order must be 2 to 8"},
		{[]int{2, 2, 2, 2, 2, 2, 2, 2, 2}, "order must be 2 to 8"},
		{[]int{3, 0}, "dim of mode 2 must be"},
		{[]int{3, -1}, "dim of mode 2 must be"},
		// One bit past 128, whatever the width of int.
		{[]int{MaxDim, MaxDim, MaxDim, MaxDim, 1<<(MaxIndexBits-4*ModeBits(MaxDim)) + 1}, "overflows"},
		{[]int{1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16}, ""},
		{[]int{1<<16 + 1, 1<<16 + 1, 1<<16 + 1, 1<<16 + 1, 1<<16 + 1, 1<<16 + 1, 1<<16 + 1, 1<<16 + 1}, "overflows"},
	}
	if MaxDim < math.MaxInt {
		// A dim past MaxDim exists only where int is wider than 32 bits
		// (MaxDim+1 as a constant would not compile elsewhere).
		beyond := MaxDim
		beyond++
		tests = append(tests, struct {
			dims []int
			want string
		}{[]int{beyond, 2}, "dim of mode 1 must be"})
	}
	for _, tc := range tests {
		err := CheckDims(tc.dims)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckDims(%v) = %v, want nil", tc.dims, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckDims(%v) = %v, want error containing %q", tc.dims, err, tc.want)
		}
	}
}

func TestModeBits(t *testing.T) {
	for _, tc := range []struct{ dim, bits int }{{1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {1 << 20, 20}, {1<<20 + 1, 21}, {MaxDim, min(32, strconv.IntSize-1)}} {
		if got := ModeBits(tc.dim); got != tc.bits {
			t.Errorf("ModeBits(%d) = %d, want %d", tc.dim, got, tc.bits)
		}
	}
}

func TestValidate(t *testing.T) {
	base := func() *COO {
		c, _ := NewCOO([]int{2, 3, 4}, 0)
		c.Append([]uint32{0, 1, 2}, 1)
		c.Append([]uint32{1, 2, 3}, -2)
		return c
	}
	tests := []struct {
		name   string
		break_ func(c *COO)
		want   string
	}{
		{"valid", func(c *COO) {}, ""},
		{"index at dim", func(c *COO) { c.Inds[2][1] = 4 }, "nonzero 1: mode 3 index 5 (1-based) exceeds dim 4"},
		{"NaN", func(c *COO) { c.Vals[0] = float32(math.NaN()) }, "nonzero 0: value must be finite"},
		{"Inf", func(c *COO) { c.Vals[1] = float32(math.Inf(-1)) }, "value must be finite"},
		{"largest finite", func(c *COO) { c.Vals[0], c.Vals[1] = -math.MaxFloat32, math.SmallestNonzeroFloat32 }, ""},
		{"NaN with a payload", func(c *COO) { c.Vals[1] = math.Float32frombits(0xffc00001) }, "nonzero 1: value must be finite"},
		{"index at 2^32-1", func(c *COO) { c.Inds[0][0] = math.MaxUint32 }, "nonzero 0: mode 1 index 4294967296 (1-based) exceeds dim 2"},
		{"short mode", func(c *COO) { c.Inds[1] = c.Inds[1][:1] }, "mode 2 has 1 indices for 2 values"},
		{"missing mode", func(c *COO) { c.Inds = c.Inds[:2] }, "3 dims but 2 index arrays"},
		{"bad dims", func(c *COO) { c.Dims[0] = 0 }, "dim of mode 1"},
	}
	for _, tc := range tests {
		c := base()
		tc.break_(c)
		err := c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Validate checks in parallel chunks and reports what a pass in order
// would: the first bad index of the first bad mode, then values.
func TestValidateReportsFirst(t *testing.T) {
	x := genCOO(rand.New(rand.NewPCG(9, 10)), []int{50, 60, 70}, 300_000)
	x.Inds[2][250_000] = 70 // mode 3, in a late chunk
	x.Inds[1][290_000] = 60 // mode 2, later still: reported first
	x.Inds[1][200_001] = 61
	x.Vals[5] = float32(math.NaN())
	for _, want := range []string{
		"nonzero 200001: mode 2 index 62 (1-based) exceeds dim 60",
		"nonzero 290000: mode 2 index 61 (1-based) exceeds dim 60",
		"nonzero 250000: mode 3 index 71 (1-based) exceeds dim 70",
		"nonzero 5: value must be finite, found NaN",
	} {
		err := x.Validate()
		if err == nil || err.Error() != want {
			t.Fatalf("Validate() = %v, want %q", err, want)
		}
		// Mend what was reported, to see the next problem.
		switch {
		case strings.Contains(want, "mode 2") && strings.Contains(want, "200001"):
			x.Inds[1][200_001] = 0
		case strings.Contains(want, "mode 2"):
			x.Inds[1][290_000] = 0
		case strings.Contains(want, "mode 3"):
			x.Inds[2][250_000] = 0
		}
	}
	x.Vals[5] = 1
	if err := x.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestPermute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := genCOO(rng, []int{3, 5, 7, 2}, 50)
	p, err := x.Permute([]int{2, 0, 3, 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{7, 3, 2, 5}; !slices.Equal(p.Dims, want) {
		t.Fatalf("dims %v, want %v", p.Dims, want)
	}
	for k := range x.NNZ() {
		if p.Inds[0][k] != x.Inds[2][k] || p.Inds[3][k] != x.Inds[1][k] {
			t.Fatalf("nonzero %d permuted wrongly", k)
		}
	}
	// Permuting by the inverse gives x back.
	q, err := p.Permute([]int{1, 3, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if !q.Equal(x) {
		t.Fatal("inverse permutation does not give the tensor back")
	}
	for _, bad := range [][]int{{0, 1, 2}, {0, 1, 2, 2}, {0, 1, 2, 4}, {-1, 0, 1, 2}} {
		if _, err := x.Permute(bad); err == nil {
			t.Errorf("Permute(%v) accepted", bad)
		}
	}
}

// TestBadArgumentsAreErrors: the functions that return an error give one
// for a nil tensor, inconsistent arrays, a bad capacity or mode, instead
// of panicking or, for a sort, cutting the index arrays to the values'
// length (which then validated).
func TestBadArgumentsAreErrors(t *testing.T) {
	// Past MaxNNZ where an int holds more (else the largest int).
	hugeCapacity := MaxNNZ
	if hugeCapacity < math.MaxInt {
		hugeCapacity++
	}
	short := &COO{Dims: []int{5, 5, 5}, Inds: [][]uint32{{2, 3, 2, 1}, {1, 1, 1, 0}, {4, 2, 4, 0}}, Vals: []float32{1, 2}}
	ok, _ := NewCOO([]int{4, 3, 2}, 1)
	ok.Append([]uint32{1, 2, 1}, 1)
	for _, c := range []struct {
		name string
		err  func() error
		want string
	}{
		{"capacity -1", func() error { _, err := NewCOO([]int{2, 2}, -1); return err }, "capacity must be 0 to"},
		{"capacity huge", func() error { _, err := NewCOO([]int{2, 2}, hugeCapacity); return err }, "capacity must be 0 to"},
		{"CSF of nil", func() error { _, err := NewCSF(nil, []int{0, 1, 2}); return err }, "tensor is nil"},
		{"HiCOO of nil", func() error { _, err := NewHiCOO(nil, 7); return err }, "tensor is nil"},
		{"fiber matrix of nil", func() error { _, err := NewFiberMatrix(nil, 0, 1); return err }, "tensor is nil"},
		{"Describe nil", func() error { _, err := Describe(nil); return err }, "tensor is nil"},
		{"WriteFile nil", func() error { return WriteFile(filepath.Join(t.TempDir(), "x.tns"), nil) }, "tensor is nil"},
		{"SortBy short values", func() error { return short.SortBy(0) }, "mode 1 has 4 indices for 2 values"},
		{"Dedup short values", func() error { _, err := short.Dedup(); return err }, "mode 1 has 4 indices for 2 values"},
		{"CompactMode out of range", func() error { _, _, err := ok.CompactMode(3); return err }, "mode 4 out of range 1 to 3"},
		{"SortBy largest int", func() error { return ok.SortBy(math.MaxInt) }, "mode " + strconv.FormatUint(uint64(math.MaxInt)+1, 10) + " out of range"},
	} {
		if c.name == "capacity huge" && hugeCapacity == MaxNNZ {
			continue // an int holds no more than MaxNNZ here
		}
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if len(short.Inds[0]) != 4 {
		t.Error("a refused sort changed the tensor")
	}
}
