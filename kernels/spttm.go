package kernels

import (
	"fmt"
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
	ld     int // row length of Uᵀ and Y as the kernels see them (spttmBlocks)
	rows   int
	cols   int
	nnz    int
	parts  int
	blocks []colBlock // the rank blocks, one pass over the entries each
	bytes  int64      // the format's arrays
	kernel spttmKernel

	// Padded copies of Uᵀ and Y, when ld > rank (spttmBlocks), ld
	// floats per row, the columns past the rank zero.
	padUT, padOut []float32

	// Set for the duration of Run.
	out, ut []float32
	user    []float32 // the caller's Y, when padded
	userUT  []float32 // the caller's Uᵀ, when padded
	phase   int       // 0: the kernel; padIn, padBack: the copies
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
	p.ld, p.blocks = spttmBlocks(rank)
	if p.ld != rank {
		p.padUT, p.padOut = make([]float32, p.cols*p.ld), make([]float32, p.rows*p.ld)
	}
	ensureWorkers(p.parts - 1)
	return p, nil
}

// colBlock is the rank columns [r0, r0+w) of one pass over the entries.
type colBlock struct{ r0, w int }

// spttmBlocks returns the row length and the rank blocks of an SpTTM plan
// of the given rank. The vector loops take blocks of eight columns or
// more; narrower ones are left to portable Go, a pass each, which made
// rank 15 cost 8-16 times rank 16 (docs/performance.md, "Ranks other than
// 16"). Where the vector loops run, every block is eight columns or more:
//   - a rank above eight that is not a multiple of eight ends with eight
//     columns that overlap the block before, [rank-8, rank): every kernel
//     sets its rows' columns of a block (HYB's remainder adds to what its
//     ELL part of the same block set), so the overlap is computed twice to
//     the same values, and nothing is copied;
//   - a rank below eight is padded to eight, in copies of Uᵀ and Y that
//     the plan holds: Y's rows are too short for one vector.
func spttmBlocks(rank int) (ld int, blocks []colBlock) {
	ld = rank
	if vec != vecScalar && rank < 8 {
		ld = 8
	}
	whole := ld
	if vec != vecScalar && ld > 8 {
		whole = ld &^ 7
	}
	r0 := 0
	for _, w := range rankBlocks(whole) {
		blocks = append(blocks, colBlock{r0, w})
		r0 += w
	}
	if whole < ld {
		blocks = append(blocks, colBlock{ld - 8, 8})
	}
	return ld, blocks
}

// SpTTMPadShapes returns the {rows, cols} of the padded copies an SpTTM
// plan of a fiber matrix of rows x cols at rank holds (spttmBlocks): Uᵀ
// and Y at eight columns where the rank is below eight, else none.
func SpTTMPadShapes(rows, cols, rank int) [][2]int {
	ld, _ := spttmBlocks(rank)
	if ld == rank {
		return nil
	}
	return [][2]int{{cols, ld}, {rows, ld}}
}

// rankBlocks returns the greedy split of rank into blocks of 64, 32, ..., 1.
func rankBlocks(rank int) []int {
	var widths []int
	for r := rank; r > 0; {
		w := maxWidth
		for w > r {
			w /= 2
		}
		widths = append(widths, w)
		r -= w
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
	padded := p.ld != p.rank
	if padded {
		p.user, p.userUT, p.out, p.ut = p.out, p.ut, p.padOut, p.padUT
		p.copyPhase(padIn, p.cols)
	}
	parallelParts(p.parts, p, &p.wg)
	if padded {
		p.copyPhase(padBack, p.rows)
	}
	p.out, p.ut, p.user, p.userUT = nil, nil, nil, nil
	return nil
}

// WorkspaceBytes returns the bytes the plan holds beside the format and
// the dense matrices: the padded copies of Uᵀ and Y at ranks below eight
// (spttmBlocks).
func (p *SpTTM) WorkspaceBytes() int64 { return 4 * int64(len(p.padUT)+len(p.padOut)) }

// copyPhase runs a copy of rows rows of rank floats: on the calling
// goroutine when it is small, else split among the parts.
func (p *SpTTM) copyPhase(phase, rows int) {
	p.phase = phase
	if rows*p.rank <= padSerial || p.parts == 1 {
		p.copyPart(0, 1)
	} else {
		parallelParts(p.parts, p, &p.wg)
	}
	p.phase = 0
}

// copyPart copies part t of n of the current copy phase's rows.
func (p *SpTTM) copyPart(t, n int) {
	if p.phase == padIn {
		padRows(p.padUT, p.userUT, p.cols, p.rank, p.ld, t, n)
	} else {
		unpadRows(p.user, p.padOut, p.rows, p.rank, p.ld, t, n)
	}
}

func (p *SpTTM) runPart(t int) {
	if p.phase != 0 {
		p.copyPart(t, p.parts)
		return
	}
	p.kernel.compute(p, t)
}

// padRows copies part t of n of the rows of src, R floats each, into
// dst's rows of ld floats.
func padRows(dst, src []float32, rows, R, ld, t, n int) {
	for i := t * rows / n; i < (t+1)*rows/n; i++ {
		copy(dst[i*ld:i*ld+R], src[i*R:(i+1)*R])
	}
}

// unpadRows copies part t of n of the rows of src, ld floats each, into
// dst's rows of R floats.
func unpadRows(dst, src []float32, rows, R, ld, t, n int) {
	for i := t * rows / n; i < (t+1)*rows/n; i++ {
		copy(dst[i*R:(i+1)*R], src[i*ld:i*ld+R])
	}
}
