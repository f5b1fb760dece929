package formats

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// ALTO is a tensor in the adaptive linearized tensor order of Helal et al.
// (ICS 2021): every nonzero is stored as one linear index, the modes' index
// bits interleaved, and the nonzeros are sorted by it. Neighbouring nonzeros
// in that order are near each other in every mode at once, so one ALTO
// tensor serves an MTTKRP of any mode with good locality, and a kernel that
// reads consecutive nonzeros sees runs of equal output rows it can reduce
// before writing.
//
// Bit order. Index bit j of mode m is placed at level j; levels are filled
// from the least significant bit of the linear index up, and within a level
// the modes that still have bits left (ModeBits(dim) > j) take one bit
// each, modes with fewer bits first (ties in mode order), as in the ALTO
// paper. A mode of dim 1 has no bits. For a 4x2x8 tensor (2, 1 and 3
// bits): linear bit 0 = j0, 1 = i0, 2 = k0, 3 = i1, 4 = k1, 5 = k2. Short
// modes first puts their bits below the long modes' at every level, so a
// run of consecutive nonzeros spreads over fewer rows of a long mode; on a
// 994-slice mode of a 3M-nonzero tensor this took the MTTKRP from 3.5 to
// 2.9 ms. Bits is the sum of the modes' ModeBits, at most MaxIndexBits =
// 128.
//
// Blocks (BLCO, Nguyen et al. 2022). The linear index is split at bit 64:
// each nonzero stores its low 64 bits in Lin, and the bits above, which
// only exist when Bits > 64, are stored once per block in BlockHigh. A block
// is a run of consecutive nonzeros with the same high bits, cut into pieces
// of at most MaxBlockNNZ nonzeros when that cap is set; with Bits <= 64 and
// no cap there is one block. A block is therefore a self-contained piece of
// the tensor (its nonzeros, their values and one 64-bit key) that a device
// with little memory can be sent one at a time, and blocks are contiguous in
// Lin and Vals, so any run of blocks is one copy.
type ALTO struct {
	Dims        []int
	Bits        int        // width of the linear index: sum over modes of ModeBits(dim)
	Modes       []ALTOMode // per mode: where its bits lie and how to extract them
	MaxBlockNNZ int        // cap on nonzeros per block, 0 for none
	Lin         []uint64   // low 64 bits of each nonzero's linear index; nonzeros sorted by the full index
	Vals        []float32  // value of each nonzero
	BlockPtr    []uint32   // len NumBlocks()+1: block b holds nonzeros BlockPtr[b] to BlockPtr[b+1]-1
	BlockHigh   []uint64   // per block, bits 64 and up of its nonzeros' linear index; nil when Bits <= 64
}

// ALTOMode says where one mode's index bits lie in the linear index and
// how to extract them. Lo and Hi mask the mode's bits in the low and high 64
// bits of the linear index; the Lo bits are the index's low LoBits bits.
//
// Extraction is a software "parallel bits extract" (x86 pext) that costs
// the same few operations whatever the mode's bit pattern: each index bit
// must move right by the number of clear mask bits below it, and writing
// that distance in binary, step s moves by 2^s every bit whose distance has
// bit s set. The six move masks per word are computed once from the mask
// (LoSteps, HiSteps), so extracting an index is 6 rounds of and, xor, shift
// and or, with no loop over bits and no branches; the same steps run as is
// on a GPU, which has no pext instruction. In a BLCO block the high word is
// fixed, so a kernel extracts FromHigh(BlockHigh[b]) once per block and ors
// FromLow(Lin[k]) per nonzero.
type ALTOMode struct {
	Bits    int       // ModeBits of the mode's dim
	Pos     []uint8   // Pos[j] is the linear-index bit holding index bit j
	Lo, Hi  uint64    // the mode's bits in the low and the high 64 bits
	LoBits  uint      // popcount(Lo): how many low index bits the low word holds
	LoSteps [6]uint64 // move masks extracting Lo's bits from the low word
	HiSteps [6]uint64 // move masks extracting Hi's bits from the high word
}

// FromLow returns the index bits the low word lo holds, in place.
func (e *ALTOMode) FromLow(lo uint64) uint32 {
	return uint32(compressBits(lo&e.Lo, &e.LoSteps))
}

// FromHigh returns the index bits the high word hi holds, shifted into place
// (above the LoBits low ones).
func (e *ALTOMode) FromHigh(hi uint64) uint32 {
	return uint32(compressBits(hi&e.Hi, &e.HiSteps) << e.LoBits)
}

// Index returns the mode's index in the linear index with high word hi and
// low word lo.
func (e *ALTOMode) Index(hi, lo uint64) uint32 { return e.FromHigh(hi) | e.FromLow(lo) }

// Decode sets dst[i] to base | FromLow(lin[i]) for every i < len(lin),
// where base is FromHigh of the block's high word (0 when Bits <= 64). It
// is the fast way to extract one mode from a run of nonzeros: the masks
// stay in registers and there is no call per nonzero (FromLow is too big
// for Go to inline), about twice as fast as calling FromLow in a loop.
func (e *ALTOMode) Decode(dst []uint32, lin []uint64, base uint32) {
	dst = dst[:len(lin)]
	mask := e.Lo
	m0, m1, m2, m3, m4, m5 := e.LoSteps[0], e.LoSteps[1], e.LoSteps[2], e.LoSteps[3], e.LoSteps[4], e.LoSteps[5]
	for i, x := range lin {
		x &= mask
		t := x & m0
		x = x ^ t | t>>1
		t = x & m1
		x = x ^ t | t>>2
		t = x & m2
		x = x ^ t | t>>4
		t = x & m3
		x = x ^ t | t>>8
		t = x & m4
		x = x ^ t | t>>16
		t = x & m5
		x = x ^ t | t>>32
		dst[i] = base | uint32(x)
	}
}

// compressMoves returns the move masks with which compressBits gathers the
// bits of mask into the low end of a word. The distance each set bit moves
// is the number of clear bits of mask below it; at step s the bits whose
// remaining distance has bit s set move by 2^s. zeros marks, for each
// position, whether the bit just below it is clear; a prefix xor of it gives
// bit s of the distance for every position.
func compressMoves(mask uint64) [6]uint64 {
	var moves [6]uint64
	zeros := ^mask << 1
	for s := range 6 {
		p := zeros ^ zeros<<1 // prefix parity: bit s of the distance
		p ^= p << 2
		p ^= p << 4
		p ^= p << 8
		p ^= p << 16
		p ^= p << 32
		mv := p & mask
		moves[s] = mv
		mask = mask ^ mv | mv>>(1<<s)
		zeros &^= p
	}
	return moves
}

// compressBits gathers the bits of x selected by the mask that moves was
// computed from (x must already be masked) into the low end.
func compressBits(x uint64, moves *[6]uint64) uint64 {
	t := x & moves[0]
	x = x ^ t | t>>1
	t = x & moves[1]
	x = x ^ t | t>>2
	t = x & moves[2]
	x = x ^ t | t>>4
	t = x & moves[3]
	x = x ^ t | t>>8
	t = x & moves[4]
	x = x ^ t | t>>16
	t = x & moves[5]
	return x ^ t | t>>32
}

// expandBits is the inverse of compressBits: it spreads the low bits of x
// over the set bits of mask, undoing the moves from the last to the first.
func expandBits(x, mask uint64, moves *[6]uint64) uint64 {
	for s := 5; s >= 0; s-- {
		mv := moves[s]
		x = x&^mv | x<<(1<<s)&mv
	}
	return x & mask
}

// spreadTables returns the tables that spread the low bits of an index
// over the set bits of mask (as expandBits does), a byte of the index at a
// time: the spread of x is the OR over c of tabs[c][x>>(8c)&255], bits of
// x past popcount(mask) ignored. A lookup or three in tables that stay in
// L1 cost less than expandBits' six rounds of shifts and masks.
func spreadTables(mask uint64) [][256]uint64 {
	var pos []int
	for m := mask; m != 0; m &= m - 1 {
		pos = append(pos, bits.TrailingZeros64(m))
	}
	tabs := make([][256]uint64, (len(pos)+7)/8)
	for c := range tabs {
		for v := range 256 {
			var x uint64
			for b := range 8 {
				if i := 8*c + b; i < len(pos) && v>>b&1 != 0 {
					x |= 1 << pos[i]
				}
			}
			tabs[c][v] = x
		}
	}
	return tabs
}

// spreadInto ORs into dst[k] the spread (spreadTables) of ind[k] >> shift.
func spreadInto(dst []uint64, ind []uint32, shift uint, tabs [][256]uint64) {
	ind = ind[:len(dst)]
	switch len(tabs) {
	case 0:
	case 1:
		t0 := &tabs[0]
		for k, v := range ind {
			dst[k] |= t0[v>>shift&255]
		}
	case 2:
		t0, t1 := &tabs[0], &tabs[1]
		for k, v := range ind {
			v >>= shift
			dst[k] |= t0[v&255] | t1[v>>8&255]
		}
	case 3:
		t0, t1, t2 := &tabs[0], &tabs[1], &tabs[2]
		for k, v := range ind {
			v >>= shift
			dst[k] |= t0[v&255] | t1[v>>8&255] | t2[v>>16&255]
		}
	default:
		for k, v := range ind {
			v >>= shift
			var x uint64
			for c := range tabs {
				x |= tabs[c][v>>(8*c)&255]
			}
			dst[k] |= x
		}
	}
}

// newALTOModes lays out the bits of dims as documented on ALTO and returns
// each mode's extraction data and the total width.
func newALTOModes(dims []int) ([]ALTOMode, int) {
	modes := make([]ALTOMode, len(dims))
	maxBits := 0
	for m, d := range dims {
		modes[m].Bits = ModeBits(d)
		maxBits = max(maxBits, modes[m].Bits)
	}
	// Within a level, modes with fewer bits come first (ties in mode
	// order), as in the ALTO paper's layout.
	order := make([]int, len(dims))
	for m := range order {
		order[m] = m
	}
	slices.SortStableFunc(order, func(a, b int) int { return modes[a].Bits - modes[b].Bits })
	pos := 0
	for j := range maxBits {
		for _, m := range order {
			e := &modes[m]
			if j >= e.Bits {
				continue
			}
			e.Pos = append(e.Pos, uint8(pos))
			if pos < 64 {
				e.Lo |= 1 << pos
			} else {
				e.Hi |= 1 << (pos - 64)
			}
			pos++
		}
	}
	for m := range modes {
		e := &modes[m]
		e.LoBits = uint(bits.OnesCount64(e.Lo))
		e.LoSteps = compressMoves(e.Lo)
		e.HiSteps = compressMoves(e.Hi)
	}
	return modes, pos
}

// altoSort computes the linear index (hi, lo) of every nonzero of t in the
// layout of modes and sorts by it. It returns the sorted low words, the
// sorted high words (nil when width <= 64) and the values in that order.
// The sort is stable. Within one word, the values' bits ride along in the
// sort in place of a permutation: no gather of the values through it, a
// random read per nonzero.
func altoSort(t *COO, modes []ALTOMode, width int) (lo, hi []uint64, vals []float32) {
	n := t.NNZ()
	w := workers(n, 1<<15)
	lo = make([]uint64, n)
	if width > 64 {
		hi = make([]uint64, n)
	}
	loTabs, hiTabs := make([][][256]uint64, len(modes)), make([][][256]uint64, len(modes))
	for m, e := range modes {
		loTabs[m], hiTabs[m] = spreadTables(e.Lo), spreadTables(e.Hi)
	}
	// perm holds the values' bits in the one-word sort, positions in the
	// two-word one.
	perm := make([]uint32, n)
	parallelChunks(n, w, func(_, a, b int) {
		for k := a; k < b; k++ {
			if hi == nil {
				perm[k] = math.Float32bits(t.Vals[k])
			} else {
				perm[k] = uint32(k)
			}
		}
		for m, ind := range t.Inds {
			e := &modes[m]
			if e.Bits == 0 {
				continue
			}
			spreadInto(lo[a:b], ind[a:b], 0, loTabs[m])
			if hi != nil && e.Hi != 0 {
				spreadInto(hi[a:b], ind[a:b], e.LoBits, hiTabs[m])
			}
		}
	})
	scratch := make([]uint64, n)
	pscratch := make([]uint32, n)
	if hi == nil {
		radixSort(lo, perm, scratch, pscratch, width)
		vals = make([]float32, n)
		parallelChunks(n, w, func(_, a, b int) {
			for k := a; k < b; k++ {
				vals[k] = math.Float32frombits(perm[k])
			}
		})
		return lo, nil, vals
	}
	// Two LSD rounds: by the low word, then stably by the high word. The
	// unsorted low words are kept to be gathered by the final permutation.
	keys := slices.Clone(lo)
	radixSort(keys, perm, scratch, pscratch, 64)
	parallelChunks(n, w, func(_, a, b int) {
		for k := a; k < b; k++ {
			keys[k] = hi[perm[k]]
		}
	})
	radixSort(keys, perm, scratch, pscratch, width-64)
	hi = keys
	parallelChunks(n, w, func(_, a, b int) {
		for k := a; k < b; k++ {
			scratch[k] = lo[perm[k]]
		}
	})
	return scratch, hi, gatherVals(t.Vals, perm)
}

// gatherVals returns vals[perm[k]] for every k.
func gatherVals(vals []float32, perm []uint32) []float32 {
	out := make([]float32, len(perm))
	parallelChunks(len(perm), workers(len(perm), 1<<15), func(_, a, b int) {
		for k := a; k < b; k++ {
			out[k] = vals[perm[k]]
		}
	})
	return out
}

// NewALTO builds the ALTO form of t, cut into blocks of at most maxBlockNNZ
// nonzeros (0: no cap, so one block unless the linear index needs more than
// 64 bits). t is not modified.
func NewALTO(t *COO, maxBlockNNZ int) (*ALTO, error) {
	if err := checkFormatInput(t); err != nil {
		return nil, fmt.Errorf("alto: %w", err)
	}
	if maxBlockNNZ < 0 {
		return nil, fmt.Errorf("alto: block cap must be 0 (none) or positive, found %d", maxBlockNNZ)
	}
	modes, width := newALTOModes(t.Dims)
	lo, hi, vals := altoSort(t, modes, width)
	a := &ALTO{
		Dims:        slices.Clone(t.Dims),
		Bits:        width,
		Modes:       modes,
		MaxBlockNNZ: maxBlockNNZ,
		Lin:         lo,
		Vals:        vals,
		BlockPtr:    []uint32{0},
	}
	n := len(lo)
	limit := maxBlockNNZ
	if limit == 0 {
		limit = n
	}
	for start := 0; start < n; {
		end := start + 1
		for end < n && end-start < limit && (hi == nil || hi[end] == hi[start]) {
			end++
		}
		if hi != nil {
			a.BlockHigh = append(a.BlockHigh, hi[start])
		}
		a.BlockPtr = append(a.BlockPtr, uint32(end))
		start = end
	}
	return a, nil
}

// ALTOBlock is one block of an ALTO tensor: nonzeros Start to
// Start+len(Lin)-1, all with the high linear-index word High.
type ALTOBlock struct {
	High  uint64    // bits 64 and up of every linear index in the block
	Start int       // position of the block's first nonzero in the tensor
	Lin   []uint64  // low 64 bits of the linear indices (a view of ALTO.Lin)
	Vals  []float32 // values (a view of ALTO.Vals)
}

// NumBlocks returns the number of blocks.
func (a *ALTO) NumBlocks() int { return len(a.BlockPtr) - 1 }

// Blocks returns every block as views of a's arrays.
func (a *ALTO) Blocks() []ALTOBlock {
	out := make([]ALTOBlock, a.NumBlocks())
	for b := range out {
		lo, hi := int(a.BlockPtr[b]), int(a.BlockPtr[b+1])
		out[b] = ALTOBlock{Start: lo, Lin: a.Lin[lo:hi], Vals: a.Vals[lo:hi]}
		if a.BlockHigh != nil {
			out[b].High = a.BlockHigh[b]
		}
	}
	return out
}

// Order returns the number of modes.
func (a *ALTO) Order() int { return len(a.Dims) }

// NNZ returns the number of nonzeros, duplicates included.
func (a *ALTO) NNZ() int { return len(a.Vals) }

// ToCOO returns the tensor a stores, in ALTO order.
func (a *ALTO) ToCOO() *COO {
	N, n := a.Order(), a.NNZ()
	t := &COO{Dims: slices.Clone(a.Dims), Inds: make([][]uint32, N), Vals: slices.Clone(a.Vals)}
	for m := range t.Inds {
		t.Inds[m] = make([]uint32, n)
	}
	parallelChunks(n, workers(n, 1<<14), func(_, lo, hi int) {
		if lo == hi {
			return
		}
		// The block holding nonzero lo: the last one starting at or before it.
		b := sort.Search(a.NumBlocks(), func(b int) bool { return int(a.BlockPtr[b+1]) > lo })
		for k := lo; k < hi; {
			end := min(hi, int(a.BlockPtr[b+1]))
			var high uint64
			if a.BlockHigh != nil {
				high = a.BlockHigh[b]
			}
			for m := range a.Modes {
				e := &a.Modes[m]
				base := e.FromHigh(high)
				out, lin := t.Inds[m][k:end], a.Lin[k:end]
				for i, l := range lin {
					out[i] = base | e.FromLow(l)
				}
			}
			k = end
			b++
		}
	})
	return t
}

// Bytes returns the bytes of a's linear indices, values and block arrays.
func (a *ALTO) Bytes() int64 {
	return int64(8*len(a.Lin) + 4*len(a.Vals) + 4*len(a.BlockPtr) + 8*len(a.BlockHigh))
}

// BytesPerNNZ returns Bytes divided by the number of nonzeros (0 if none).
func (a *ALTO) BytesPerNNZ() float64 { return bytesPerNNZ(a.Bytes(), a.NNZ()) }
