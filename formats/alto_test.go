package formats

import (
	"math/bits"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// refALTOIndex computes the linear index of coordinate idx by the rule
// documented on ALTO, one bit at a time: level j gives one bit to every
// mode with more than j bits, modes with fewer bits first (ties in mode
// order), from bit 0 up. modeBits[m] is ModeBits of mode m's dim.
func refALTOIndex(modeBits []int, idx []uint32) (hi, lo uint64) {
	pos, top := 0, slices.Max(modeBits)
	var order []int
	for b := 0; b <= top; b++ { // modes by bits, then mode number
		for m, mb := range modeBits {
			if mb == b {
				order = append(order, m)
			}
		}
	}
	for j := range top {
		for _, m := range order {
			b := modeBits[m]
			if j >= b {
				continue
			}
			if idx[m]>>j&1 == 1 {
				if pos < 64 {
					lo |= 1 << pos
				} else {
					hi |= 1 << (pos - 64)
				}
			}
			pos++
		}
	}
	return hi, lo
}

// modeBitsOf returns ModeBits of every dim.
func modeBitsOf(dims []int) []int {
	out := make([]int, len(dims))
	for m, d := range dims {
		out[m] = ModeBits(d)
	}
	return out
}

// refALTOOrder returns a copy of x stably sorted by refALTOIndex, with the
// indices.
func refALTOOrder(x *COO) (*COO, []uint64, []uint64) {
	n := x.NNZ()
	his, los := make([]uint64, n), make([]uint64, n)
	idx := make([]uint32, x.Order())
	mb := modeBitsOf(x.Dims)
	for k := range n {
		his[k], los[k] = refALTOIndex(mb, x.Coord(k, idx))
	}
	perm := make([]int, n)
	for k := range perm {
		perm[k] = k
	}
	slices.SortStableFunc(perm, func(a, b int) int {
		if his[a] != his[b] {
			return cmpU64(his[a], his[b])
		}
		return cmpU64(los[a], los[b])
	})
	y := &COO{Dims: x.Dims, Inds: make([][]uint32, x.Order())}
	sh, sl := make([]uint64, n), make([]uint64, n)
	for m := range y.Inds {
		for _, p := range perm {
			y.Inds[m] = append(y.Inds[m], x.Inds[m][p])
		}
	}
	for k, p := range perm {
		y.Vals = append(y.Vals, x.Vals[p])
		sh[k], sl[k] = his[p], los[p]
	}
	return y, sh, sl
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestCompressExpandBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	masks := []uint64{0, 1, 1 << 63, ^uint64(0), 0x5555555555555555, 0x9249249249249249, 0xF0F0}
	for range 200 {
		masks = append(masks, rng.Uint64()&rng.Uint64())
	}
	for _, mask := range masks {
		moves := compressMoves(mask)
		for range 20 {
			x := rng.Uint64()
			var want uint64 // bit loop pext
			for p, j := 0, 0; p < 64; p++ {
				if mask>>p&1 == 1 {
					want |= (x >> p & 1) << j
					j++
				}
			}
			if got := compressBits(x&mask, &moves); got != want {
				t.Fatalf("compress(%#x, %#x) = %#x, want %#x", x, mask, got, want)
			}
			if got := expandBits(want, mask, &moves); got != x&mask {
				t.Fatalf("expand(%#x, %#x) = %#x, want %#x", want, mask, got, x&mask)
			}
		}
	}
}

// TestSpreadTables holds the table spread of indices (spreadInto) to
// expandBits, for masks of every popcount up to 40 (one to five tables)
// and shifts that drop the low bits an earlier word took.
func TestSpreadTables(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for pop := 0; pop <= 40; pop++ {
		for range 5 {
			// A random mask of pop bits.
			var mask uint64
			for bits.OnesCount64(mask) < pop {
				mask |= 1 << rng.IntN(64)
			}
			moves := compressMoves(mask)
			tabs := spreadTables(mask)
			for _, shift := range []uint{0, 3, 17} {
				ind := make([]uint32, 50)
				dst := make([]uint64, len(ind))
				for k := range ind {
					ind[k] = rng.Uint32()
					dst[k] = uint64(k) << 60 // ORed into, not overwritten
				}
				spreadInto(dst, ind, shift, tabs)
				for k, v := range ind {
					want := uint64(k)<<60 | expandBits(uint64(v>>shift)&(1<<pop-1), mask, &moves)
					if dst[k] != want {
						t.Fatalf("mask %#x (%d bits), shift %d: spread of %#x = %#x, want %#x", mask, pop, shift, v, dst[k], want)
					}
				}
			}
		}
	}
}

func TestALTOByHand(t *testing.T) {
	// 4x2x8: 2, 1 and 3 bits; linear bits (low to high) j0 i0 k0 i1 k1 k2
	// (the 1-bit mode first in each level).
	x := &COO{
		Dims: []int{4, 2, 8},
		Inds: [][]uint32{{3, 2, 1, 0}, {1, 0, 1, 0}, {5, 6, 1, 7}},
		Vals: []float32{1, 2, 3, 4},
	}
	a, err := NewALTO(x, 0)
	if err != nil {
		t.Fatal(err)
	}
	// (1,1,1) = 1+2+4 = 7; (3,1,5) = 1+2+4+8+32 = 47;
	// (0,0,7) = 4+16+32 = 52; (2,0,6) = 8+16+32 = 56.
	if want := []uint64{7, 47, 52, 56}; !slices.Equal(a.Lin, want) {
		t.Errorf("Lin = %v, want %v", a.Lin, want)
	}
	if want := []float32{3, 1, 4, 2}; !slices.Equal(a.Vals, want) {
		t.Errorf("Vals = %v, want %v", a.Vals, want)
	}
	if a.Bits != 6 || a.NumBlocks() != 1 || a.BlockHigh != nil {
		t.Errorf("Bits %d blocks %d high %v, want 6, 1, nil", a.Bits, a.NumBlocks(), a.BlockHigh)
	}
	for m, want := range []uint64{0b001010, 0b000001, 0b110100} {
		if a.Modes[m].Lo != want || a.Modes[m].Hi != 0 {
			t.Errorf("mode %d mask %#b/%#b, want %#b", m, a.Modes[m].Hi, a.Modes[m].Lo, want)
		}
	}
	if got := a.Modes[2].Index(0, 47); got != 5 {
		t.Errorf("mode 3 of 47 = %d, want 5", got)
	}
	if a.Bytes() != 4*8+4*4+2*4 {
		t.Errorf("Bytes = %d", a.Bytes())
	}
}

// checkALTO checks a as a stored form of x: the block rule, the linear
// index of every nonzero (recomputed bit by bit from the indices that
// Modes[m].Index extracts, for every mode), the order by linear index, and
// the round trip to x as a set.
func checkALTO(t *testing.T, a *ALTO, x *COO) {
	t.Helper()
	checkALTOBlocks(t, a, x)
	back := a.ToCOO()
	back.Sort()
	want := x
	if !x.IsSortedBy(naturalModes(x.Order())...) {
		want = sortedNatural(x)
	}
	if !back.Equal(want) {
		t.Fatalf("dims %v cap %d: round trip differs", x.Dims, a.MaxBlockNNZ)
	}
}

// naturalModes returns 0, 1, ..., n-1.
func naturalModes(n int) []int {
	modes := make([]int, n)
	for m := range modes {
		modes[m] = m
	}
	return modes
}

// checkALTOBlocks checks the blocks and the linear indices of a.
func checkALTOBlocks(t *testing.T, a *ALTO, x *COO) {
	t.Helper()
	if (a.Bits > 64) != (a.BlockHigh != nil) {
		t.Fatalf("dims %v: %d bits but BlockHigh nil = %v", x.Dims, a.Bits, a.BlockHigh == nil)
	}
	blocks := a.Blocks()
	if len(blocks) != a.NumBlocks() || a.BlockPtr[0] != 0 || int(a.BlockPtr[len(a.BlockPtr)-1]) != a.NNZ() {
		t.Fatalf("dims %v: bad BlockPtr ends", x.Dims)
	}
	idx := make([]uint32, a.Order())
	mb := modeBitsOf(a.Dims)
	var prevHi, prevLo uint64
	for b, blk := range blocks {
		if len(blk.Lin) == 0 || a.MaxBlockNNZ > 0 && len(blk.Lin) > a.MaxBlockNNZ {
			t.Fatalf("dims %v cap %d: block %d has %d nonzeros", x.Dims, a.MaxBlockNNZ, b, len(blk.Lin))
		}
		// Blocks are maximal: one ends at a change of the high bits, at
		// the cap, or at the end.
		if b > 0 && blk.High == blocks[b-1].High && a.MaxBlockNNZ != len(blocks[b-1].Lin) {
			t.Fatalf("dims %v cap %d: block %d ends early", x.Dims, a.MaxBlockNNZ, b-1)
		}
		for m := range a.Modes {
			e := &a.Modes[m]
			dec := make([]uint32, len(blk.Lin))
			e.Decode(dec, blk.Lin, e.FromHigh(blk.High))
			for i, lo := range blk.Lin {
				if dec[i] != e.Index(blk.High, lo) {
					t.Fatalf("dims %v: Decode of mode %d differs from Index at nonzero %d", x.Dims, m, blk.Start+i)
				}
			}
		}
		for i, lo := range blk.Lin {
			k := blk.Start + i
			if k > 0 && (blk.High < prevHi || blk.High == prevHi && lo < prevLo) {
				t.Fatalf("dims %v: nonzero %d out of ALTO order", x.Dims, k)
			}
			prevHi, prevLo = blk.High, lo
			for m := range a.Modes {
				idx[m] = a.Modes[m].Index(blk.High, lo)
			}
			if hi, lo2 := refALTOIndex(mb, idx); hi != blk.High || lo2 != lo {
				t.Fatalf("dims %v: nonzero %d: extracted %v re-encode to %#x:%#x, stored %#x:%#x",
					x.Dims, k, idx, hi, lo2, blk.High, lo)
			}
		}
	}
}

// blockOf returns the block holding nonzero k.
func blockOf(a *ALTO, k int) int {
	b, _ := slices.BinarySearch(a.BlockPtr, uint32(k)+1)
	return b - 1
}

// checkALTOReference compares a with an independent stable sort of x by the
// reference linear index: same linear indices, values and coordinates in
// the same order.
func checkALTOReference(t *testing.T, a *ALTO, x *COO) {
	t.Helper()
	ref, his, los := refALTOOrder(x)
	if !slices.Equal(a.Lin, los) || !slices.Equal(a.Vals, ref.Vals) || !a.ToCOO().Equal(ref) {
		t.Fatalf("dims %v cap %d: differs from the reference order", x.Dims, a.MaxBlockNNZ)
	}
	for k := range his {
		if a.BlockHigh != nil && a.BlockHigh[blockOf(a, k)] != his[k] {
			t.Fatalf("dims %v: nonzero %d in a block with other high bits", x.Dims, k)
		}
	}
}

func TestALTORoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for order := 2; order <= 5; order++ {
		for trial := range 6 {
			x := randomFormatTensor(rng, order, trial >= 4)
			for _, limit := range []int{0, 1, 7} {
				a, err := NewALTO(x, limit)
				if err != nil {
					t.Fatalf("dims %v: %v", x.Dims, err)
				}
				checkALTO(t, a, x)
				checkALTOReference(t, a, x)
			}
		}
	}
}

func TestALTOWideBlocks(t *testing.T) {
	// 5 modes of 2^25: 125 bits, so blocks split on the high word.
	rng := rand.New(rand.NewPCG(9, 10))
	x := genCOO(rng, []int{1 << 25, 1 << 25, 1 << 25, 1 << 25, 1 << 25}, 3000)
	// 200 nonzeros that share their (zero) high bits.
	idx := make([]uint32, 5)
	for k := range 200 {
		for m := range idx {
			idx[m] = uint32(k * (m + 1)) // small: all in the low word
		}
		x.Append(idx, float32(k))
	}
	x.Dedup()
	for _, limit := range []int{0, 1, 7, 100} {
		a, err := NewALTO(x, limit)
		if err != nil {
			t.Fatal(err)
		}
		if a.Bits != 125 {
			t.Fatalf("Bits = %d, want 125", a.Bits)
		}
		checkALTO(t, a, x)
		checkALTOReference(t, a, x)
	}
}

func TestALTOEmptyAndErrors(t *testing.T) {
	empty, _ := NewCOO([]int{3, 1, 5}, 0)
	a, err := NewALTO(empty, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.NumBlocks() != 0 || a.ToCOO().NNZ() != 0 {
		t.Fatalf("empty: %d blocks", a.NumBlocks())
	}
	bad := &COO{Dims: []int{2, 3}, Inds: [][]uint32{{0}, {3}}, Vals: []float32{1}}
	for _, tc := range []struct {
		x     *COO
		limit int
		want  string
	}{
		{bad, 0, "exceeds dim"},
		{empty, -1, "block cap"},
	} {
		if _, err := NewALTO(tc.x, tc.limit); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want it to contain %q", err, tc.want)
		}
	}
}

func TestALTOLargeParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := genCOO(rng, []int{1 << 20, 1 << 20, 1 << 20, 1 << 20}, 150_000) // 80 bits
	for _, limit := range []int{0, 4096} {
		a, err := NewALTO(x, limit)
		if err != nil {
			t.Fatal(err)
		}
		checkALTO(t, a, x)
	}
}

func TestALTORealTensors(t *testing.T) {
	for _, path := range realTensorFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			x := loadRealTensor(t, path)
			// Caps of 1 and 7 are covered on random tensors; here one
			// uncapped and one capped build keep the race run short.
			for _, limit := range []int{0, 7} {
				a, err := NewALTO(x, limit)
				if err != nil {
					t.Fatal(err)
				}
				if limit == 0 {
					checkALTO(t, a, x)
					continue
				}
				// Capped: the same order cut into more blocks.
				if a.NumBlocks() != (a.NNZ()+limit-1)/limit && a.Bits <= 64 {
					t.Fatalf("cap %d: %d blocks for %d nonzeros", limit, a.NumBlocks(), a.NNZ())
				}
				back := a.ToCOO()
				back.Sort()
				if !back.Equal(x) {
					t.Fatalf("cap %d: round trip differs", limit)
				}
			}
		})
	}
}

// BenchmarkNewALTO measures building an ALTO tensor without a block cap and
// reports its footprint.
func BenchmarkNewALTO(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		b.Run(bt.name, func(b *testing.B) {
			var a *ALTO
			for b.Loop() {
				var err error
				if a, err = NewALTO(bt.x, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(a.BytesPerNNZ(), "bytes/nnz")
			b.ReportMetric(float64(a.Bits), "index-bits")
		})
	}
}

// BenchmarkALTOExtract measures extracting every mode's index from every
// linear index, the decoding an ALTO kernel does per nonzero.
func BenchmarkALTOExtract(b *testing.B) {
	for _, bt := range formatBenchTensors(b) {
		b.Run(bt.name, func(b *testing.B) {
			a, err := NewALTO(bt.x, 0)
			if err != nil {
				b.Fatal(err)
			}
			// Decode in chunks, as a kernel would, into a small buffer.
			buf := make([]uint32, 256)
			for b.Loop() {
				for _, blk := range a.Blocks() {
					for m := range a.Modes {
						e := &a.Modes[m]
						base := e.FromHigh(blk.High)
						for lo := 0; lo < len(blk.Lin); lo += len(buf) {
							e.Decode(buf, blk.Lin[lo:min(lo+len(buf), len(blk.Lin))], base)
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(a.NNZ()*a.Order()), "ns/index")
		})
	}
}

// TestFormatsAtWordBoundary builds every format for dims whose index bits
// total 63, 64, 65 and 128, where the 64-bit key paths switch to two words.
func TestFormatsAtWordBoundary(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("dims of 2^32 need a 64-bit int")
	}
	// w32 is 2^32 where int has 64 bits; written as 1 << 32 the literal
	// would not compile for 32-bit targets.
	const w32 = 1 << (strconv.IntSize - 32)
	rng := rand.New(rand.NewPCG(17, 18))
	for _, dims := range [][]int{
		{w32 / 2, w32},
		{w32, w32},
		{w32, w32, 2},
		{3, w32, w32},
		{w32, w32, w32, w32},
	} {
		x := genCOO(rng, dims, 500)
		// Extreme coordinates too: all zeros and all maximal.
		lo, hi := make([]uint32, len(dims)), make([]uint32, len(dims))
		for m, d := range dims {
			hi[m] = uint32(d - 1)
		}
		x.Append(lo, 1)
		x.Append(hi, 2)
		x.Dedup()
		for _, limit := range []int{0, 7} {
			a, err := NewALTO(x, limit)
			if err != nil {
				t.Fatal(err)
			}
			checkALTO(t, a, x)
			checkALTOReference(t, a, x)
		}
		for _, b := range []int{1, DefaultHiCOOBlockBits, MaxHiCOOBlockBits} {
			h, err := NewHiCOO(x, b)
			if err != nil {
				t.Fatal(err)
			}
			checkHiCOO(t, h, x)
		}
		for _, mo := range csfModeOrders(rng, len(dims)) {
			c, err := NewCSF(x, mo)
			if err != nil {
				t.Fatal(err)
			}
			checkCSF(t, c, x)
		}
	}
}
