package kernels

import (
	"fmt"
	"iter"
	"runtime"

	"github.com/sparsetune/sparsetune/formats"
)

// SpTTM is a plan for the sparse tensor times matrix product on the mode-n
// fiber matrix F of a tensor, in one storage format, for one rank R:
//
//	Y = F·Uᵀ, Y(r, :) = Σ_k F(r, k)·Uᵀ(k, :)
//
// where Uᵀ is the dense Dims[Mode] x R factor (passed transposed, like the
// MTTKRP factors, so a length-R row of it is contiguous) and Y is the
// semi-sparse result, one dense length-R row per fiber row of F. A plan is
// built once per (format, rank) by NewSpTTM or the per-format constructors;
// it owns the split of the work among threads, so Run allocates nothing.
// The format must not change while the plan is in use, and a plan runs one
// Run at a time.
//
// Every format is parallelised owner-computes: each part owns a contiguous
// range of rows of Y, chosen so that parts hold equal entries plus rows
// (formats.FiberMatrix.RowSplits and its COO and HYB counterparts), so no
// two parts write the same row and there are no locks, atomics or
// reductions.
type SpTTM struct {
	format string
	rank   int
	rows   int
	cols   int
	nnz    int
	parts  int
	blocks []colBlock // the rank blocks, one pass over the entries each
	bytes  int64      // the format's arrays
	kernel spttmKernel

	// Set for the duration of Run.
	out, ut []float32
	wg      partsDone
}

// spttmKernel is one format's kernel: compute runs part t, writing its rows
// of p.out.
type spttmKernel interface {
	compute(p *SpTTM, t int)
}

// newSpTTMPlan fills the format-independent part of a plan. work is the
// count the parts are balanced by (entries plus rows).
func newSpTTMPlan(format string, f *formats.FiberMatrix, bytes int64, rank, threads int) (*SpTTM, error) {
	if rank < 1 {
		return nil, fmt.Errorf("spttm %s: rank must be at least 1, found %d", format, rank)
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	work := f.NNZ() + f.Rows()
	p := &SpTTM{format: format, rank: rank, rows: f.Rows(), cols: f.Cols(), nnz: f.NNZ(), bytes: bytes,
		parts: max(1, min(threads, work/minPartNNZ))}
	p.blocks = spttmBlocks(rank)
	ensureWorkers(p.parts - 1)
	return p, nil
}

// colBlock is the rank columns [r0, r0+w) of one pass over the entries.
type colBlock struct{ r0, w int }

// spttmBlocks returns the rank blocks of an SpTTM plan of the given rank.
// The vector loops run a block of up to 64 columns in one pass over the
// entries, masking the last vector where the rank ends inside one
// (spttmPiece), so there is a pass per 64 columns at any rank. The
// portable loops take the greedy split of 64, 32, ..., 1 columns.
func spttmBlocks(rank int) []colBlock {
	var blocks []colBlock
	if vec == vecScalar {
		for r0, w := range pow2Blocks(colBlock{0, rank}) {
			blocks = append(blocks, colBlock{r0, w})
		}
		return blocks
	}
	for r0 := 0; r0 < rank; r0 += maxWidth {
		blocks = append(blocks, colBlock{r0, min(maxWidth, rank-r0)})
	}
	return blocks
}

// pow2Blocks yields the start and width of the greedy split of block c
// into 64, 32, ..., 1 columns, which the portable loops take: MTTKRP's
// rank blocks (rankBlocks), SpTTM's for the portable loops
// (spttmBlocks), and, at run time, the blocks of an SpTTM plan made for
// the vector loops that runs after SetInnerLoops chose the portable ones.
// It allocates nothing, so Run may call it.
func pow2Blocks(c colBlock) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for r0, end := c.r0, c.r0+c.w; r0 < end; {
			w := maxWidth
			for w > end-r0 {
				w /= 2
			}
			if !yield(r0, w) {
				return
			}
			r0 += w
		}
	}
}

// rankBlocks returns the greedy split of rank into blocks of 64, 32, ..., 1
// (pow2Blocks).
func rankBlocks(rank int) []int {
	var widths []int
	for _, w := range pow2Blocks(colBlock{0, rank}) {
		widths = append(widths, w)
	}
	return widths
}

// NewSpTTM builds the SpTTM plan of f in whichever of the formats FiberCOO,
// CSR, ELL and HYB it is held, for rank R, using threads goroutines (0 for
// GOMAXPROCS).
func NewSpTTM(f formats.FiberFormat, rank, threads int) (*SpTTM, error) {
	switch f := f.(type) {
	case *formats.FiberCOO:
		return NewCOOSpTTM(f, rank, threads)
	case *formats.CSR:
		return NewCSRSpTTM(f, rank, threads)
	case *formats.ELL:
		return NewELLSpTTM(f, rank, threads)
	case *formats.HYB:
		return NewHYBSpTTM(f, rank, threads)
	}
	return nil, fmt.Errorf("spttm: no kernel for a %T", f)
}

// Format returns the name of the plan's format.
func (p *SpTTM) Format() string { return p.format }

// Rank returns R.
func (p *SpTTM) Rank() int { return p.rank }

// Parts returns how many goroutines Run uses.
func (p *SpTTM) Parts() int { return p.parts }

// Flops returns the flops of one Run by the convention 2·nnz·R (padding
// slots of ELL and HYB are not counted: they are not work).
func (p *SpTTM) Flops() float64 { return 2 * float64(p.nnz) * float64(p.rank) }

// Bytes returns the bytes one Run moves by the compulsory-traffic model:
// the format's arrays read once (padding included), the factor Uᵀ read
// once (Dims[Mode]·R·4 bytes) and Y written once (Rows·R·4 bytes).
func (p *SpTTM) Bytes() float64 {
	return float64(p.bytes) + 4*float64(p.cols+p.rows)*float64(p.rank)
}

// Run computes Y into out, which it overwrites. out must be Rows() x R and
// ut Dims[Mode] x R.
func (p *SpTTM) Run(out, ut *Matrix) error {
	if err := ut.check(p.cols, p.rank); err != nil {
		return fmt.Errorf("spttm %s: factor: %w", p.format, err)
	}
	if err := out.check(p.rows, p.rank); err != nil {
		return fmt.Errorf("spttm %s: output: %w", p.format, err)
	}
	p.out, p.ut = out.Data, ut.Data
	parallelParts(p.parts, p, &p.wg)
	p.out, p.ut = nil, nil
	return nil
}

func (p *SpTTM) runPart(t int) { p.kernel.compute(p, t) }
