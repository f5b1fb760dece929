package kernels

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/sparsetune/sparsetune/formats"
)

// MTTKRP is a plan for the matricized tensor times Khatri-Rao product of
// one tensor, in one format, for one output mode and one rank R:
//
//	M(i_n, r) = Σ X(i_1..i_N) · Π_{m≠n} A_m(i_m, r)
//
// where the A_m are dense Dims[m] x R factor matrices and M is
// Dims[n] x R. A plan is built once per (tensor, format, mode, rank) by
// NewCOOMTTKRP, NewCSFMTTKRP, NewHiCOOMTTKRP or NewALTOMTTKRP, which pick
// the format; it owns every workspace the kernel needs (the split of the
// nonzeros among threads, private output copies, scratch rows), so Run
// allocates nothing. The tensor must not change while the plan is in use.
//
// A plan is not safe for concurrent use: run one Run at a time per plan
// (build one plan per goroutine to run concurrently).
//
// Work is split among parts (goroutines) balanced by nonzeros. How each
// format avoids write conflicts on M is documented on its constructor.
type MTTKRP struct {
	format string
	mode   int
	rank   int
	// ld is the row length of the factor and output rows the kernels
	// read and write: the rank, or the rank padded to whole vector
	// blocks (padRank), in copies the plan owns.
	ld     int
	dims   []int
	nnz    int
	parts  int
	widths []int // rank blocks: the kernels make one pass per block
	others []int // the modes other than mode, in increasing order
	kernel mttkrpKernel
	xbytes int64 // bytes of the tensor's format arrays

	// Output placement (see placeRows). Part t writes rows
	// [rowLo[t], rowHi[t]) either straight into the output (priv[t] nil)
	// or into its private copy priv[t], which phase 2 adds into the output.
	rowLo, rowHi []int
	priv         [][]float32
	zero         [][]rowRange // per part: output rows no direct part writes, zeroed in phase 1
	reduce       bool
	selfZero     bool // the kernel writes every row of its interval itself (CSF), so it is not cleared first
	scatter      bool // runs of equal output index are short (shortRuns): add each nonzero directly

	ws []*mttkrpScratch // per part

	// Padded copies, when ld > rank: the other modes' factors and the
	// output, ld floats per row, the columns past the rank zero.
	padFac [formats.MaxOrder][]float32
	padOut Matrix

	// Set for the duration of Run.
	out   *Matrix
	fac   [formats.MaxOrder][]float32
	src   [formats.MaxOrder][]float32 // the caller's factors, when padded
	user  []float32                   // the caller's output, when padded
	phase int
	wg    partsDone
}

// padRank returns the row length an MTTKRP plan of the given rank
// computes with. The kernels make one pass over the nonzeros per rank
// block, the blocks 64, 32, 16, 8, 4, 2 and 1 columns wide, taken
// greedily. The vector loops take the blocks of eight columns or more;
// the narrower ones are left to portable Go, and on the Intel Xeon of
// docs/performance.md ("Ranks other than 16") rank 15, one block of each
// width from 8 down, cost 6 to 20 times rank 16; and rank 24 (16 + 8)
// cost 1.5 times rank 32. So where the vector loops run, a plan pads the
// rank to whole blocks of 64 and one more of 8, 16, 32 or 64 columns: a
// vector pass per block. It copies the factors into rows of that length
// (zero past the rank) and computes into a padded output, copied back
// after: the copies cost O(Σ dims · R), the kernel O(nnz · R).
func padRank(rank int) int {
	rest := rank % maxWidth
	if vec == vecScalar || rest == 0 {
		return rank
	}
	block := 8
	for block < rest {
		block *= 2
	}
	return rank - rest + block
}

// MTTKRPPadShapes returns the {rows, cols} of the padded copies an MTTKRP
// plan of an order-len(dims) tensor along mode at rank holds (padRank):
// the other modes' factors and the output, rank padded; none when the
// rank is not padded. Callers that check memory before building a plan
// (CheckDenseFits) add them to the operands.
func MTTKRPPadShapes(dims []int, mode, rank int) [][2]int {
	ld := padRank(rank)
	if ld == rank {
		return nil
	}
	shapes := make([][2]int, len(dims))
	for m, d := range dims {
		shapes[m] = [2]int{d, ld}
	}
	return shapes
}

// padSerial is the most floats a padded plan copies on the calling
// goroutine rather than on every part: waking the parts costs more.
var padSerial = 1 << 15

// mttkrpKernel is one format's kernel: compute runs part t of phase 1,
// writing rows of dst, whose row 0 is output row rowBase.
type mttkrpKernel interface {
	compute(p *MTTKRP, t int, dst []float32, rowBase int)
}

type rowRange struct{ lo, hi int }

// mttkrpScratch is one part's scratch: decoded indices of a chunk of
// nonzeros and accumulator rows. Each part has its own, allocated
// separately, so parts never share a cache line of scratch.
type mttkrpScratch struct {
	// alto is the chunk ALTO's fused loops read (here, not on the stack,
	// because arrays passed to a function value escape).
	alto altoChunk

	idx  [formats.MaxOrder][]uint32
	rows [formats.MaxOrder + 1][maxWidth]float32
	ops  mttkrpOperands
}

const (
	maxWidth = 64 // widest rank block; rows of this many float32 are 4 cache lines
	// chunkNNZ is how many nonzeros HiCOO and ALTO decode at a time: the
	// decoded indices (N x 4 KiB) stay in L1 while every rank block of the
	// chunk is processed.
	chunkNNZ = 1024
)

// isolatePad is the float32s kept unused on either side of memory one
// part writes: 256 bytes, four cache lines.
const isolatePad = 64

// isolated returns n zero float32s with isolatePad unused ones on either
// side, for memory one part writes while others write theirs. Go packs
// small allocations side by side, and a neighbour that another core writes
// is a neighbour the prefetchers pull in: a part that writes the last line
// of its buffer makes the CPU fetch the next line, which then ping-pongs
// between the cores. On an order-3 ALTO MTTKRP whose 8-row output mode
// gives part 1 a 512-byte private copy, the copy sat just below the output
// that part 0 writes, and the run took 3.0-3.3 ms against 2.5-2.7 ms with
// the padding (2 threads, Intel Xeon; the same run with the output
// allocated elsewhere: 2.5 ms).
func isolated(n int) []float32 {
	buf := make([]float32, n+2*isolatePad)
	return buf[isolatePad : isolatePad+n : isolatePad+n]
}

// minPartNNZ is the fewest nonzeros worth a part of their own; below it the
// cost of waking a worker exceeds the work. Tests lower it to exercise the
// parallel paths on small tensors.
var minPartNNZ = 1 << 13

// rowSpanChanges returns the smallest interval [lo, hi) holding every
// index in ind ([0, 0) if ind is empty) and how many times ind changes
// value: len(ind) minus changes is how many nonzeros continue a run.
func rowSpanChanges(ind []uint32) (lo, hi, changes int) {
	if len(ind) == 0 {
		return 0, 0, 0
	}
	mn, mx, prev := ind[0], ind[0], ind[0]
	for _, i := range ind {
		mn = min(mn, i)
		mx = max(mx, i)
		if i != prev {
			changes++
		}
		prev = i
	}
	return int(mn), int(mx) + 1, changes
}

// shortRuns reports whether runs of equal output index average fewer than
// 16 nonzeros. Below that, summing a run in registers before its one
// store costs more (a branch mispredicted at the end of every run, and
// for HiCOO and order-4 ALTO the separately decoded indices) than adding
// every nonzero into its row. Measured on ALTO order: runs of 1.5 to 3
// nonzeros ran 2 to 3 times faster scattered, and runs of 4.5 (a short
// mode of a banded tensor) still 1.3 to 1.5 times; sorted COO, with runs
// of hundreds, is faster with them.
func shortRuns(changes, n int) bool { return 16*changes > n }

// errNotRoot is returned by NewCSFMTTKRP for a CSF not rooted at the mode.
var errNotRoot = errors.New("the CSF must be rooted at the output mode (build one CSF per mode with that mode first in ModeOrder)")

// partsFor returns how many parts a plan of nnz nonzeros on threads
// goroutines (0 for GOMAXPROCS) splits them into.
func partsFor(nnz, threads int) int {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return max(1, min(threads, nnz/minPartNNZ))
}

// newPlan fills the format-independent part of a plan.
func newPlan(format string, dims []int, nnz, mode, rank, threads int) (*MTTKRP, error) {
	if mode < 0 || mode >= len(dims) {
		return nil, fmt.Errorf("mttkrp %s: mode %d out of range 0 to %d", format, mode, len(dims)-1)
	}
	if rank < 1 {
		return nil, fmt.Errorf("mttkrp %s: rank must be at least 1, found %d", format, rank)
	}
	parts := partsFor(nnz, threads)
	p := &MTTKRP{format: format, mode: mode, rank: rank, ld: padRank(rank), dims: dims, nnz: nnz, parts: parts}
	if p.ld != rank {
		for m, d := range dims {
			if m == mode {
				p.padOut = Matrix{Rows: d, Cols: p.ld, Data: make([]float32, d*p.ld)}
			} else {
				p.padFac[m] = make([]float32, d*p.ld)
			}
		}
	}
	p.widths = rankBlocks(p.ld)
	for m := range dims {
		if m != mode {
			p.others = append(p.others, m)
		}
	}
	p.ws = make([]*mttkrpScratch, parts)
	for t := range p.ws {
		p.ws[t] = new(mttkrpScratch)
	}
	ensureWorkers(parts - 1)
	return p, nil
}

// placeRows decides where each part writes, given the interval of output
// rows [lo[t], hi[t]) its nonzeros touch (lo[t] >= hi[t] if none). A part
// writes straight into the output when its interval overlaps no interval
// of an earlier direct part (part 0 always does); any other part gets a
// private copy of its interval, summed into the output by phase 2. Rows no
// direct part writes are zeroed in phase 1, split evenly among the parts.
// So a COO sorted by the output mode runs owner-computes with no copy at
// all, and an unsorted one pays one copy of the rows per extra part.
func (p *MTTKRP) placeRows(lo, hi []int) {
	rows := p.dims[p.mode]
	p.rowLo, p.rowHi = lo, hi
	p.priv = make([][]float32, p.parts)
	var direct []rowRange
	for t := range p.parts {
		if lo[t] >= hi[t] {
			lo[t], hi[t] = 0, 0
			continue
		}
		overlaps := false
		for _, d := range direct {
			if lo[t] < d.hi && d.lo < hi[t] {
				overlaps = true
				break
			}
		}
		if overlaps {
			p.priv[t] = isolated((hi[t] - lo[t]) * p.ld)
			p.reduce = true
		} else {
			direct = append(direct, rowRange{lo[t], hi[t]})
		}
	}
	// Gaps: the complement of the direct intervals, cut at part boundaries.
	p.zero = make([][]rowRange, p.parts)
	for t := range p.parts {
		a, b := t*rows/p.parts, (t+1)*rows/p.parts
		for i := a; i < b; {
			end := b
			covered := false
			for _, d := range direct {
				if d.lo <= i && i < d.hi {
					i, covered = d.hi, true
					break
				}
				if d.lo > i && d.lo < end {
					end = d.lo
				}
			}
			if !covered {
				p.zero[t] = append(p.zero[t], rowRange{i, end})
				i = end
			}
		}
	}
}

// Format returns the name of the plan's tensor format.
func (p *MTTKRP) Format() string { return p.format }

// Mode returns the output mode (0-based).
func (p *MTTKRP) Mode() int { return p.mode }

// Rank returns R.
func (p *MTTKRP) Rank() int { return p.rank }

// Parts returns how many goroutines Run uses.
func (p *MTTKRP) Parts() int { return p.parts }

// Flops returns the flop count of one Run by the convention N·nnz·R.
func (p *MTTKRP) Flops() float64 {
	return float64(len(p.dims)) * float64(p.nnz) * float64(p.rank)
}

// Bytes returns the bytes one Run moves between memory and the cores by the
// compulsory-traffic model: the format's arrays read once, each factor
// matrix other than the output mode's read once (Dims[m]·R·4 bytes), and
// the output written once (Dims[mode]·R·4 bytes). Factor rows read again
// after leaving the cache are not counted, so bytes/second computed from it
// is a lower bound on the bandwidth a run used.
func (p *MTTKRP) Bytes() float64 {
	b := float64(p.xbytes)
	for _, d := range p.dims {
		b += 4 * float64(d) * float64(p.rank)
	}
	return b
}

// WorkspaceBytes returns the bytes the plan holds beside the tensor and
// the dense matrices: the private output copies of parts whose rows
// overlap (see placeRows), the padded copies of the factors and the
// output (padRank) and the per-part scratch.
func (p *MTTKRP) WorkspaceBytes() int64 {
	b := 4 * int64(len(p.padOut.Data))
	for _, f := range p.padFac {
		b += 4 * int64(len(f))
	}
	for _, pv := range p.priv {
		b += 4 * int64(len(pv))
	}
	for _, ws := range p.ws {
		b += int64(unsafe.Sizeof(*ws))
		for _, idx := range ws.idx {
			b += 4 * int64(cap(idx))
		}
	}
	return b
}

// Run computes the MTTKRP into out, which it overwrites. out must be
// Dims[mode] x R; factors must hold one Dims[m] x R matrix per mode m
// (factors[mode] is not read and may be nil).
func (p *MTTKRP) Run(out *Matrix, factors []*Matrix) error {
	if err := p.check(out, factors); err != nil {
		return err
	}
	p.out = out
	for m, f := range factors {
		if m != p.mode {
			p.fac[m] = f.Data
		}
	}
	padded := p.ld != p.rank
	if padded {
		p.user, p.out = out.Data, &p.padOut
		p.src, p.fac = p.fac, p.padFac
		p.copyPhase(padIn)
	}
	p.phase = 1
	parallelParts(p.parts, p, &p.wg)
	if p.reduce {
		p.phase = 2
		parallelParts(p.parts, p, &p.wg)
	}
	if padded {
		p.copyPhase(padBack)
	}
	p.out, p.user = nil, nil
	p.fac, p.src = [formats.MaxOrder][]float32{}, [formats.MaxOrder][]float32{}
	return nil
}

// The phases of a padded plan's copies (padRank).
const (
	padIn   = 3 // the factors into the padded rows
	padBack = 4 // the padded output back into the caller's
)

// copyPhase runs a copy phase: on the calling goroutine when it is small,
// else split among the parts.
func (p *MTTKRP) copyPhase(phase int) {
	p.phase = phase
	floats := p.dims[p.mode] * p.rank
	if phase == padIn {
		floats = 0
		for _, m := range p.others {
			floats += p.dims[m] * p.rank
		}
	}
	if floats <= padSerial || p.parts == 1 {
		p.copyPart(0, 1)
		return
	}
	parallelParts(p.parts, p, &p.wg)
}

// copyPart copies part t of n of the current copy phase: its share of
// each matrix's rows.
func (p *MTTKRP) copyPart(t, n int) {
	if p.phase == padIn {
		for _, m := range p.others {
			padRows(p.fac[m], p.src[m], p.dims[m], p.rank, p.ld, t, n)
		}
		return
	}
	unpadRows(p.user, p.padOut.Data, p.dims[p.mode], p.rank, p.ld, t, n)
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

func (p *MTTKRP) check(out *Matrix, factors []*Matrix) error {
	if len(factors) != len(p.dims) {
		return fmt.Errorf("mttkrp %s: %d factor matrices for an order-%d tensor", p.format, len(factors), len(p.dims))
	}
	for m, f := range factors {
		if m == p.mode {
			continue
		}
		if err := f.check(p.dims[m], p.rank); err != nil {
			return fmt.Errorf("mttkrp %s: factor %d: %w", p.format, m, err)
		}
	}
	if err := out.check(p.dims[p.mode], p.rank); err != nil {
		return fmt.Errorf("mttkrp %s: output: %w", p.format, err)
	}
	return nil
}

// runPart runs part t of the current phase.
func (p *MTTKRP) runPart(t int) {
	if p.phase == padIn || p.phase == padBack {
		p.copyPart(t, p.parts)
		return
	}
	R := p.ld
	out := p.out.Data
	if p.phase == 2 {
		rows := p.dims[p.mode]
		a, b := t*rows/p.parts, (t+1)*rows/p.parts
		for s, pv := range p.priv {
			if pv == nil {
				continue
			}
			lo, hi := max(a, p.rowLo[s]), min(b, p.rowHi[s])
			if lo >= hi {
				continue
			}
			addInto(out[lo*R:hi*R], pv[(lo-p.rowLo[s])*R:(hi-p.rowLo[s])*R])
		}
		return
	}
	for _, z := range p.zero[t] {
		clear(out[z.lo*R : z.hi*R])
	}
	if p.priv[t] != nil {
		clear(p.priv[t])
		p.kernel.compute(p, t, p.priv[t], p.rowLo[t])
		return
	}
	if p.rowLo[t] < p.rowHi[t] {
		if !p.selfZero {
			clear(out[p.rowLo[t]*R : p.rowHi[t]*R])
		}
		p.kernel.compute(p, t, out, 0)
	}
}

// addInto sets dst[i] += src[i]: with the vector unit for the largest
// multiple of its step, in Go for the rest.
func addInto(dst, src []float32) {
	src = src[:len(dst)]
	n := addVec(dst, src)
	dst, src = dst[n:], src[n:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// MTTKRPReference computes the MTTKRP of x for mode by the definition, one
// nonzero at a time, accumulating in float64; it is the yardstick the
// tests hold every format to. It returns M as a row-major Dims[mode] x R
// slice, R taken from the factors.
func MTTKRPReference(x *formats.COO, mode int, factors []*Matrix) ([]float64, error) {
	if x == nil {
		return nil, errors.New("mttkrp reference: the tensor is nil")
	}
	N := x.Order()
	if mode < 0 || mode >= N {
		return nil, fmt.Errorf("mttkrp reference: mode %d out of range 0 to %d", mode, N-1)
	}
	if len(factors) != N {
		return nil, fmt.Errorf("mttkrp reference: %d factor matrices for an order-%d tensor", len(factors), N)
	}
	R := factors[(mode+1)%N].Cols
	for m, f := range factors {
		if m == mode {
			continue
		}
		if err := f.check(x.Dims[m], R); err != nil {
			return nil, fmt.Errorf("mttkrp reference: factor %d: %w", m, err)
		}
	}
	out := make([]float64, x.Dims[mode]*R)
	row := make([]float64, R)
	for k, v := range x.Vals {
		for r := range row {
			row[r] = float64(v)
		}
		for m, f := range factors {
			if m == mode {
				continue
			}
			a := f.Row(int(x.Inds[m][k]))
			for r := range row {
				row[r] *= float64(a[r])
			}
		}
		o := out[int(x.Inds[mode][k])*R:]
		for r := range row {
			o[r] += row[r]
		}
	}
	return out, nil
}

// NewMTTKRP builds the MTTKRP plan of x in whichever of the formats COO,
// CSF, HiCOO and ALTO it is held (see formats.NewTensorFormat), for a 0-based
// mode and rank, using threads goroutines (0 for GOMAXPROCS).
func NewMTTKRP(x formats.TensorFormat, mode, rank, threads int) (*MTTKRP, error) {
	switch x := x.(type) {
	case *formats.COO:
		return NewCOOMTTKRP(x, mode, rank, threads)
	case *formats.CSF:
		return NewCSFMTTKRP(x, mode, rank, threads)
	case *formats.HiCOO:
		return NewHiCOOMTTKRP(x, mode, rank, threads)
	case *formats.ALTO:
		return NewALTOMTTKRP(x, mode, rank, threads)
	}
	return nil, fmt.Errorf("mttkrp: no kernel for a %T", x)
}
