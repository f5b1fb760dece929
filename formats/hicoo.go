package formats

import (
	"fmt"
	"slices"
)

// DefaultHiCOOBlockBits is the default b of NewHiCOO: blocks 2^7 = 128 wide
// in every mode, the size Li et al. (HiCOO, SC'18) use on CPUs. The choice
// trades footprint against reuse. Larger blocks hold more nonzeros each, so
// the 4(N+1) bytes per block are spread thinner (on the shared real tensors
// b = 8 needs up to a third fewer bytes per nonzero than b = 7), but an
// MTTKRP touches up to 2^b rows of each factor per block; at b = 7 that is
// 8 KiB per mode at rank 16, so the rows of all modes of an order-3 or -4
// block stay in L1/L2 while the block is processed, and at b = 8 they do not.
// Smaller blocks only add block overhead.
const DefaultHiCOOBlockBits = 7

// MaxHiCOOBlockBits is the largest b: element offsets are uint8.
const MaxHiCOOBlockBits = 8

// HiCOO is a tensor in hierarchical coordinate format (Li, Sun and Vuduc,
// SC'18): the index space is cut into blocks 2^b wide in every mode, each
// block stores its block coordinates once (uint32 per mode) and each nonzero
// only its offsets inside the block (uint8 per mode), so a nonzero of an
// order-N tensor costs N+4 bytes plus its share of its block's 4(N+1).
//
// Order. Blocks are sorted in Z (Morton) order of their block coordinates
// and the nonzeros in a block in Z order of their offsets: this is exactly
// the ALTO order of the nonzeros (see ALTO), because ALTO's levels 0..b-1
// hold all offset bits and the levels above all block bits, interleaved the
// same way. Z order, rather than lexicographic order, keeps consecutive
// blocks near each other in every mode, so one HiCOO tensor serves an MTTKRP
// of any mode.
//
// Block k holds nonzeros BlockPtr[k] to BlockPtr[k+1]-1; the mode-m index
// of nonzero i of block k is BlockInds[m][k]<<BlockBits | ElemInds[m][i].
// BlockPtr is uint32 because it counts nonzeros, at most MaxNNZ.
type HiCOO struct {
	Dims      []int
	BlockBits int        // b: blocks are 2^b wide in every mode
	BlockPtr  []uint32   // len NumBlocks()+1: block k holds nonzeros BlockPtr[k] to BlockPtr[k+1]-1
	BlockInds [][]uint32 // [mode][block] block coordinate: index >> BlockBits
	ElemInds  [][]uint8  // [mode][nonzero] offset in the block: index & (2^BlockBits - 1)
	Vals      []float32  // value of each nonzero
}

// NewHiCOO builds the HiCOO form of t with blocks 2^blockBits wide; pass
// DefaultHiCOOBlockBits unless measuring. blockBits must be 1 to
// MaxHiCOOBlockBits. t is not modified.
func NewHiCOO(t *COO, blockBits int) (*HiCOO, error) {
	if err := checkFormatInput(t); err != nil {
		return nil, fmt.Errorf("hicoo: %w", err)
	}
	if blockBits < 1 || blockBits > MaxHiCOOBlockBits {
		return nil, fmt.Errorf("hicoo: block bits must be 1 to %d, found %d", MaxHiCOOBlockBits, blockBits)
	}
	N, n := t.Order(), t.NNZ()
	modes, width := newALTOModes(t.Dims)
	lo, hi, vals := altoSort(t, modes, width)
	// The offset bits are the lowest offBits of the linear index (at most
	// 8 modes x 8 bits = 64, so all in the low word); a block starts where
	// the bits above them change.
	offBits := 0
	for _, e := range modes {
		offBits += min(e.Bits, blockBits)
	}
	startsBlock := func(k int) bool {
		return k == 0 || lo[k]>>offBits != lo[k-1]>>offBits || hi != nil && hi[k] != hi[k-1]
	}

	w := workers(n, 1<<15)
	starts := make([]bool, n)
	firstBlock := make([]int, w+1) // chunk c's first block id
	parallelChunks(n, w, func(c, a, b int) {
		cnt := 0
		for k := a; k < b; k++ {
			if startsBlock(k) {
				starts[k] = true
				cnt++
			}
		}
		firstBlock[c+1] = cnt
	})
	for c := range w {
		firstBlock[c+1] += firstBlock[c]
	}
	nb := firstBlock[w]

	x := &HiCOO{
		Dims:      slices.Clone(t.Dims),
		BlockBits: blockBits,
		BlockPtr:  make([]uint32, nb+1),
		BlockInds: make([][]uint32, N),
		ElemInds:  make([][]uint8, N),
		Vals:      vals,
	}
	x.BlockPtr[nb] = uint32(n)
	for m := range N {
		x.BlockInds[m] = make([]uint32, nb)
		x.ElemInds[m] = make([]uint8, n)
	}
	offMask := uint32(1)<<blockBits - 1
	parallelChunks(n, w, func(c, a, b int) {
		blk := firstBlock[c]
		for k := a; k < b; k++ {
			if starts[k] {
				x.BlockPtr[blk] = uint32(k)
				blk++
			}
		}
		// Mode by mode, so each loop streams one output array; the index
		// is extracted once and gives both the offset and, at a block's
		// first nonzero, the block coordinate.
		for m := range modes {
			e := &modes[m]
			offs, bi := x.ElemInds[m], x.BlockInds[m]
			blk := firstBlock[c]
			for k := a; k < b; k++ {
				idx := e.FromLow(lo[k])
				if hi != nil && e.Hi != 0 {
					idx |= e.FromHigh(hi[k])
				}
				offs[k] = uint8(idx & offMask)
				if starts[k] {
					bi[blk] = idx >> blockBits
					blk++
				}
			}
		}
	})
	return x, nil
}

// Order returns the number of modes.
func (x *HiCOO) Order() int { return len(x.Dims) }

// NNZ returns the number of nonzeros, duplicates included.
func (x *HiCOO) NNZ() int { return len(x.Vals) }

// NumBlocks returns the number of non-empty blocks.
func (x *HiCOO) NumBlocks() int { return len(x.BlockPtr) - 1 }

// MeanBlockNNZ returns the mean number of nonzeros per block (0 if none).
func (x *HiCOO) MeanBlockNNZ() float64 {
	if x.NumBlocks() == 0 {
		return 0
	}
	return float64(x.NNZ()) / float64(x.NumBlocks())
}

// ToCOO returns the tensor x stores, in x's (Z) order.
func (x *HiCOO) ToCOO() *COO {
	N, n := x.Order(), x.NNZ()
	t := &COO{Dims: slices.Clone(x.Dims), Inds: make([][]uint32, N), Vals: slices.Clone(x.Vals)}
	nb := x.NumBlocks()
	for m := range N {
		out, bi, ei := make([]uint32, n), x.BlockInds[m], x.ElemInds[m]
		parallelChunks(nb, workers(nb, 1<<10), func(_, a, b int) {
			for blk := a; blk < b; blk++ {
				base := bi[blk] << x.BlockBits
				for k := x.BlockPtr[blk]; k < x.BlockPtr[blk+1]; k++ {
					out[k] = base | uint32(ei[k])
				}
			}
		})
		t.Inds[m] = out
	}
	return t
}

// Bytes returns the bytes of x's block, offset and value arrays.
func (x *HiCOO) Bytes() int64 {
	N := int64(x.Order())
	return 4*int64(len(x.BlockPtr)) + 4*N*int64(x.NumBlocks()) + N*int64(x.NNZ()) + 4*int64(len(x.Vals))
}

// BytesPerNNZ returns Bytes divided by the number of nonzeros (0 if none).
func (x *HiCOO) BytesPerNNZ() float64 { return bytesPerNNZ(x.Bytes(), x.NNZ()) }
