package formats

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// tensorDataDir holds the real tensors shared by the tests of every format.
const tensorDataDir = "../../shared/data/tensors"

// readTNSForMTTKRPTest parses the plain FROSTT .tns layout (1-based
// "i j k ... val" lines, # comments, dims = largest index per mode). It
// stands in for ReadFile, which is written elsewhere, so that the format
// tests do not depend on the reader.
func readTNSForMTTKRPTest(path string) (*COO, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var inds [][]uint32
	var vals []float32
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if inds == nil {
			inds = make([][]uint32, len(fields)-1)
		}
		if len(fields) != len(inds)+1 {
			return nil, fmt.Errorf("%s:%d: want %d fields, found %d", path, line, len(inds)+1, len(fields))
		}
		for m := range inds {
			i, err := strconv.ParseUint(fields[m], 10, 32)
			if err != nil || i == 0 {
				return nil, fmt.Errorf("%s:%d: bad index %q", path, line, fields[m])
			}
			inds[m] = append(inds[m], uint32(i-1))
		}
		v, err := strconv.ParseFloat(fields[len(inds)], 32)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: bad value %q", path, line, fields[len(inds)])
		}
		vals = append(vals, float32(v))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inds == nil {
		return nil, fmt.Errorf("%s: no nonzeros", path)
	}
	dims := make([]int, len(inds))
	for m, ind := range inds {
		dims[m] = int(slices.Max(ind)) + 1
	}
	t := &COO{Dims: dims, Inds: inds, Vals: vals}
	return t, t.Validate()
}

// realTensorFiles lists the shared .tns files or skips the test.
func realTensorFiles(tb testing.TB) []string {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(tensorDataDir, "*.tns"))
	if len(files) == 0 {
		tb.Skipf("no real tensors: %s/*.tns not found", tensorDataDir)
	}
	return files
}

var realTensorCache struct {
	sync.Mutex
	m map[string]*COO
}

// loadRealTensor reads a real tensor and removes its duplicates, so that
// round trips can be compared exactly. Tensors are cached across tests (and
// must not be modified) so the race-detector run stays short.
func loadRealTensor(tb testing.TB, path string) *COO {
	tb.Helper()
	realTensorCache.Lock()
	defer realTensorCache.Unlock()
	if x, ok := realTensorCache.m[path]; ok {
		return x
	}
	x, err := readTNSForMTTKRPTest(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := x.Dedup(); err != nil {
		tb.Fatal(err)
	}
	if realTensorCache.m == nil {
		realTensorCache.m = map[string]*COO{}
	}
	realTensorCache.m[path] = x
	return x
}

// randomFormatTensor returns a deduplicated random tensor of the given
// order whose dims mix 1, small and large values; with wide set, the dims
// are large enough that the index bits exceed 64 (but not 128), for
// orders above 2 where int has 32 bits (dims are then below 2^31).
func randomFormatTensor(rng *rand.Rand, order int, wide bool) *COO {
	dims := make([]int, order)
	for m := range dims {
		switch r := rng.IntN(6); {
		case wide:
			dims[m] = int(min(MaxDim, uint64(1)<<(min(32, 128/order)-rng.IntN(3)))) - rng.IntN(5)
		case r == 0:
			dims[m] = 1
		case r <= 3:
			dims[m] = 1 + rng.IntN(40)
		default:
			dims[m] = 1 + rng.IntN(1<<20)
		}
	}
	if wide {
		dims[rng.IntN(order)] = 1          // a dim of 1 among the wide ones
		dims[rng.IntN(order)] = MaxDim / 2 // 2^31 with a 64-bit int
	}
	x := genCOO(rng, dims, rng.IntN(3000))
	if _, err := x.Dedup(); err != nil {
		panic(err)
	}
	return x
}

// sortedNatural returns a copy of x sorted by modes 0..N-1.
func sortedNatural(x *COO) *COO {
	y := x.Clone()
	y.Sort()
	return y
}

// csfModeOrders returns, for each root m, the mode order with m first and
// the other modes in natural order, plus one random permutation if rng is
// not nil.
func csfModeOrders(rng *rand.Rand, order int) [][]int {
	var out [][]int
	for root := range order {
		o := []int{root}
		for m := range order {
			if m != root {
				o = append(o, m)
			}
		}
		out = append(out, o)
	}
	if rng != nil {
		out = append(out, rng.Perm(order))
	}
	return out
}

func TestCSFByHand(t *testing.T) {
	// 2x3x4 tensor, nonzeros given out of order.
	x := &COO{
		Dims: []int{2, 3, 4},
		Inds: [][]uint32{
			{1, 0, 0, 1, 0, 1},
			{1, 0, 2, 0, 0, 1},
			{3, 2, 1, 3, 0, 0},
		},
		Vals: []float32{6, 2, 3, 4, 1, 5},
	}
	orig := x.Clone()
	tests := []struct {
		order []int
		ptr   [][]uint32
		idx   [][]uint32
		vals  []float32
	}{
		{
			order: []int{0, 1, 2},
			ptr:   [][]uint32{{0, 2, 4}, {0, 2, 3, 4, 6}},
			idx:   [][]uint32{{0, 1}, {0, 2, 0, 1}, {0, 2, 1, 3, 0, 3}},
			vals:  []float32{1, 2, 3, 4, 5, 6},
		},
		{
			order: []int{2, 0, 1},
			ptr:   [][]uint32{{0, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 6}},
			idx:   [][]uint32{{0, 1, 2, 3}, {0, 1, 0, 0, 1}, {0, 1, 2, 0, 0, 1}},
			vals:  []float32{1, 5, 3, 2, 4, 6},
		},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.order), func(t *testing.T) {
			c, err := NewCSF(x, tc.order)
			if err != nil {
				t.Fatal(err)
			}
			if !x.Equal(orig) {
				t.Fatal("NewCSF modified its input")
			}
			if !slices.EqualFunc(c.FiberPtr, tc.ptr, slices.Equal) {
				t.Errorf("FiberPtr = %v, want %v", c.FiberPtr, tc.ptr)
			}
			if !slices.EqualFunc(c.FiberIdx, tc.idx, slices.Equal) {
				t.Errorf("FiberIdx = %v, want %v", c.FiberIdx, tc.idx)
			}
			if !slices.Equal(c.Vals, tc.vals) {
				t.Errorf("Vals = %v, want %v", c.Vals, tc.vals)
			}
			var want int64
			for _, p := range tc.ptr {
				want += int64(4 * len(p))
			}
			for _, p := range tc.idx {
				want += int64(4 * len(p))
			}
			want += 4 * 6
			if c.Bytes() != want {
				t.Errorf("Bytes = %d, want %d", c.Bytes(), want)
			}
			back := c.ToCOO()
			if !back.IsSortedBy(tc.order...) {
				t.Error("ToCOO is not in the CSF's order")
			}
			if !sortedNatural(back).Equal(sortedNatural(orig)) {
				t.Error("round trip differs")
			}
		})
	}
}

func TestCSFRejectsBadInput(t *testing.T) {
	x := &COO{Dims: []int{2, 3}, Inds: [][]uint32{{0, 1}, {2, 3}}, Vals: []float32{1, 2}}
	tests := []struct {
		name  string
		x     *COO
		order []int
		want  string
	}{
		{"index beyond dim", x, []int{0, 1}, "exceeds dim"},
		{"short order", &COO{Dims: []int{2, 3}, Inds: [][]uint32{{0}, {1}}, Vals: []float32{1}}, []int{0}, "every mode"},
		{"repeated mode", &COO{Dims: []int{2, 3}, Inds: [][]uint32{{0}, {1}}, Vals: []float32{1}}, []int{1, 1}, "twice"},
		{"ragged", &COO{Dims: []int{2, 3}, Inds: [][]uint32{{0}, {1, 2}}, Vals: []float32{1}}, []int{0, 1}, "indices for"},
	}
	for _, tc := range tests {
		_, err := NewCSF(tc.x, tc.order)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// checkCSF checks the structural invariants of c and that it round-trips to
// want (sorted naturally).
func checkCSF(t *testing.T, c *CSF, want *COO) {
	t.Helper()
	N := c.Order()
	for l := range N - 1 {
		ptr := c.FiberPtr[l]
		if len(ptr) != c.NumFibers(l)+1 || ptr[0] != 0 || int(ptr[len(ptr)-1]) != c.NumFibers(l+1) {
			t.Fatalf("order %v level %d: bad FiberPtr ends", c.ModeOrder, l)
		}
		for f := range c.NumFibers(l) {
			if ptr[f] >= ptr[f+1] {
				t.Fatalf("order %v level %d: empty fiber %d", c.ModeOrder, l, f)
			}
		}
	}
	back := c.ToCOO()
	if !back.IsSortedBy(c.ModeOrder...) {
		t.Fatalf("order %v: ToCOO not in CSF order", c.ModeOrder)
	}
	back.Sort()
	if !back.Equal(want) {
		t.Fatalf("order %v: round trip differs", c.ModeOrder)
	}
}

func TestCSFRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for order := 2; order <= 5; order++ {
		for trial := range 6 {
			x := randomFormatTensor(rng, order, trial == 5)
			want := sortedNatural(x)
			for _, mo := range csfModeOrders(rng, order) {
				// want is sorted by modes 0..N-1: NewCSF sorts it by the
				// lead modes only (sortedLead).
				for _, in := range []*COO{x, want} {
					c, err := NewCSF(in, mo)
					if err != nil {
						t.Fatalf("dims %v order %v: %v", x.Dims, mo, err)
					}
					checkCSF(t, c, want)
				}
			}
		}
	}
}

func TestCSFEmptyAndDuplicates(t *testing.T) {
	empty, _ := NewCOO([]int{3, 4, 5}, 0)
	c, err := NewCSF(empty, []int{1, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	checkCSF(t, c, empty)
	// Duplicates stay separate leaves under one fiber.
	dup := &COO{Dims: []int{2, 2}, Inds: [][]uint32{{1, 1, 0}, {1, 1, 1}}, Vals: []float32{1, 2, 3}}
	c, err = NewCSF(dup, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.FiberPtr[0], []uint32{0, 1, 3}) || !slices.Equal(c.FiberIdx[1], []uint32{1, 1, 1}) {
		t.Fatalf("duplicates: ptr %v idx %v", c.FiberPtr, c.FiberIdx)
	}
	checkCSF(t, c, sortedNatural(dup))
}

func TestCSFLargeParallel(t *testing.T) {
	// Enough nonzeros that construction runs in several chunks.
	rng := rand.New(rand.NewPCG(3, 4))
	x := genCOO(rng, []int{50, 300, 2000, 7}, 200_000)
	want := sortedNatural(x)
	for _, mo := range csfModeOrders(rng, 4) {
		for _, in := range []*COO{x, want} {
			c, err := NewCSF(in, mo)
			if err != nil {
				t.Fatal(err)
			}
			checkCSF(t, c, want)
		}
	}
}

func TestCSFRealTensors(t *testing.T) {
	for _, path := range realTensorFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			x := loadRealTensor(t, path)
			for root := range x.Order() {
				mo := csfModeOrders(nil, x.Order())[root]
				c, err := NewCSF(x, mo)
				if err != nil {
					t.Fatal(err)
				}
				checkCSF(t, c, x)
			}
		})
	}
}

var benchTensorCache struct {
	sync.Mutex
	m map[string]*COO
}

// formatBenchTensors returns the tensors the format benchmarks convert:
// the real splatt_med4.tns (if present) and a generated order-3 tensor of
// 2M uniformly random nonzeros.
func formatBenchTensors(b *testing.B) []struct {
	name string
	x    *COO
} {
	b.Helper()
	benchTensorCache.Lock()
	defer benchTensorCache.Unlock()
	if benchTensorCache.m == nil {
		benchTensorCache.m = map[string]*COO{}
		if x, err := readTNSForMTTKRPTest(filepath.Join(tensorDataDir, "splatt_med4.tns")); err == nil {
			benchTensorCache.m["splatt_med4"] = x
		} else {
			b.Logf("splatt_med4 skipped: %v", err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		benchTensorCache.m["gen2M"] = genCOO(rng, []int{100000, 20000, 5000}, 2_000_000)
		// As most files are: sorted by modes 0..N-1 (sortedLead).
		sorted := benchTensorCache.m["gen2M"].Clone()
		sorted.Sort()
		benchTensorCache.m["gen2M-sorted"] = sorted
	}
	var out []struct {
		name string
		x    *COO
	}
	for _, name := range []string{"splatt_med4", "gen2M", "gen2M-sorted"} {
		if x, ok := benchTensorCache.m[name]; ok {
			out = append(out, struct {
				name string
				x    *COO
			}{name, x})
		}
	}
	return out
}

// BenchmarkNewCSF measures building a CSF rooted at mode 0 (modes in
// natural order) and reports its footprint.
func BenchmarkNewCSF(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		b.Run(bt.name, func(b *testing.B) {
			var c *CSF
			for b.Loop() {
				var err error
				if c, err = NewCSF(bt.x, csfModeOrders(nil, bt.x.Order())[0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(c.BytesPerNNZ(), "bytes/nnz")
			b.ReportMetric(float64(bt.x.NNZ()), "nnz")
		})
	}
}
