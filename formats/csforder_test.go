package formats

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// leafTensor is an order-3 tensor whose third mode follows from the
// second (k = j mod 3): every (i, j) holds one nonzero, so RootedOrder's
// leaf for mode 1 (mode 3, 2,000 fibers of one nonzero) is the worst
// choice, and mode 2's fibers (the (i, k) and (j, k) pairs: 150 and 40)
// are long. scale spreads the indices (dims ×scale) without changing the
// fibers, past 64 bits of packed indices when scale is large.
func leafTensor(scale int) *COO {
	x, _ := NewCOO([]int{50 * scale, 40 * scale, 3 * scale}, 2000)
	for i := range 50 {
		for j := range 40 {
			x.Append([]uint32{uint32(i * scale), uint32(j * scale), uint32(j % 3 * scale)}, float32(1+i+j))
		}
	}
	return x
}

// summedCOO is genCOO's tensor with its duplicates summed, as the CSF
// needs.
func summedCOO(t *testing.T, rng *rand.Rand, dims []int, nnz int) *COO {
	t.Helper()
	x := genCOO(rng, dims, nnz)
	if _, err := x.SumDuplicates(); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestCSFOrder: the leaf moves to the mode of fewest fibers when
// RootedOrder's has clearly more, the other modes stay in increasing
// order, and nothing moves for a tensor whose RootedOrder is already
// best, an order-2 tensor or an empty one. NewTensorFormat builds its
// CSF in this order.
func TestCSFOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Every nonzero a fiber of its own in every mode: nothing to gain.
	uniform := summedCOO(t, rng, []int{300, 200, 100}, 3000)
	empty, _ := NewCOO([]int{4, 5, 6}, 0)
	matrix, _ := NewCOO([]int{30, 40}, 10)
	for i := range 10 {
		matrix.Append([]uint32{uint32(i), uint32(3 * i)}, 1)
	}
	for _, c := range []struct {
		name string
		x    *COO
		want [][]int // per root
	}{
		{"leaf tensor", leafTensor(1), [][]int{{0, 2, 1}, {1, 2, 0}, {2, 1, 0}}},
		{"leaf tensor, indices past 64 bits", leafTensor(1 << 22), [][]int{{0, 2, 1}, {1, 2, 0}, {2, 1, 0}}},
		{"uniform", uniform, [][]int{{0, 1, 2}, {1, 0, 2}, {2, 0, 1}}},
		{"empty", empty, [][]int{{0, 1, 2}, {1, 0, 2}, {2, 0, 1}}},
		{"order 2", matrix, [][]int{{0, 1}, {1, 0}}},
	} {
		conv := NewConverter(c.x)
		for root, want := range c.want {
			if got := CSFOrder(c.x, root); !slices.Equal(got, want) {
				t.Errorf("%s, root %d: order %v, want %v", c.name, root+1, got, want)
			}
			if got := conv.CSFOrder(root); !slices.Equal(got, want) {
				t.Errorf("%s, root %d: the Converter's order %v, want %v", c.name, root+1, got, want)
			}
			if c.x.NNZ() == 0 {
				continue
			}
			f, err := NewTensorFormat(c.x, "csf", root)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.(*CSF).ModeOrder; !slices.Equal(got, want) {
				t.Errorf("%s, root %d: NewTensorFormat's CSF in %v, want %v", c.name, root+1, got, want)
			}
			if f, err = conv.Format("csf", root); err != nil {
				t.Fatal(err)
			}
			if got := f.(*CSF).ModeOrder; !slices.Equal(got, want) {
				t.Errorf("%s, root %d: the Converter's CSF in %v, want %v", c.name, root+1, got, want)
			}
		}
	}
}

// TestFiberCounts: the sketch counts each mode's fibers within 5% of the
// exact count, packed or hashed, at sizes that run one chunk and
// several, and the same counts whatever the number of cores.
func TestFiberCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		dims []int
		nnz  int
	}{
		{[]int{40, 30, 20}, 500},
		{[]int{2000, 300, 50}, 200000},
		{[]int{1 << 30, 1 << 30, 1 << 30, 7}, 150000}, // past 64 bits: hashed keys
		{[]int{500, 60, 8, 9}, 100000},
	} {
		x := summedCOO(t, rng, c.dims, c.nnz)
		leaves := make([]int, x.Order())
		for m := range leaves {
			leaves[m] = m
		}
		got := fiberCounts(x, leaves)
		for m := range x.Order() {
			seen := map[string]bool{}
			key := make([]byte, 0, 4*x.Order())
			for k := range x.NNZ() {
				key = key[:0]
				for n, ind := range x.Inds {
					if n != m {
						key = append(key, byte(ind[k]), byte(ind[k]>>8), byte(ind[k]>>16), byte(ind[k]>>24))
					}
				}
				seen[string(key)] = true
			}
			exact := float64(len(seen))
			if e := got[m]/exact - 1; e > 0.05 || e < -0.05 {
				t.Errorf("dims %v mode %d: %.0f fibers counted, %.0f exact", c.dims, m+1, got[m], exact)
			}
		}
		procs := runtime.GOMAXPROCS(1)
		one := fiberCounts(x, leaves)
		runtime.GOMAXPROCS(procs)
		if !slices.Equal(one, got) {
			t.Errorf("dims %v: %v on one core, %v on %d", c.dims, one, got, procs)
		}
	}
}
