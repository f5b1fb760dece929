package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/kernels"
)

// TTM computes the SpTTM Y = X ×ₙ U along the 0-based mode, with the
// factor given transposed, ut = Uᵀ (Dims[mode] x R, as package kernels
// takes it: a nonzero reads one contiguous row). The slices of the mode's
// fiber matrix (cut by formats.DefaultSliceMode) are split between the
// devices; Result.Y holds one dense row per non-empty mode-n fiber, at the
// coordinates of Result.Fibers' rows.
//
// TTM is PlanTTM, one Run and Close: a caller running the same mode again
// with new operands keeps the plan instead and pays the conversion once.
func (e *Engine) TTM(ctx context.Context, x *formats.COO, mode int, ut *kernels.Matrix) (*Result, error) {
	start := time.Now()
	if err := checkInput(x, mode); err != nil {
		return nil, fmt.Errorf("ttm: %w", err)
	}
	if ut == nil || ut.Cols < 1 || ut.Rows != x.Dims[mode] || len(ut.Data) != ut.Rows*ut.Cols {
		return nil, fmt.Errorf("ttm: factor must be Dims[%d] x R = %d x R with R >= 1, found %s", mode+1, x.Dims[mode], shape(ut))
	}
	p, err := e.planTTM(ctx, x, mode, formats.DefaultSliceMode(mode), ut.Cols, true)
	if err != nil {
		return nil, err
	}
	return p.runOnce(ctx, []*kernels.Matrix{ut}, start)
}

// runOnce runs a plan built for one call and closes it.
func (p *Plan) runOnce(ctx context.Context, operands []*kernels.Matrix, start time.Time) (*Result, error) {
	res, err := p.Run(ctx, operands, nil)
	err = errors.Join(err, p.Close())
	if err != nil {
		return nil, err
	}
	return p.oneShot(res, start), nil
}

// PlanTTM prepares the SpTTM of x along the 0-based mode at rank R for
// many runs (see Plan): the mode's fiber matrix is sliced, the formats
// chosen, the slices split, converted and bound on the devices. Each
// Plan.Run then takes Uᵀ (Dims[mode] x R) and writes Y, one row per row
// of Plan.Fibers().
func (e *Engine) PlanTTM(ctx context.Context, x *formats.COO, mode, rank int) (*Plan, error) {
	return e.planTTM(ctx, x, mode, formats.DefaultSliceMode(mode), rank, false)
}

// PlanTTMSliced is PlanTTM with the fiber matrix sliced by sliceMode
// (formats.NewFiberMatrix): Y's rows come grouped by that mode's index,
// and each device computes whole groups. Tucker's TTM chain of mode n
// contracts another mode first and slices by n, so every output row of
// the chain is one slice (decomp.EngineKernels).
func (e *Engine) PlanTTMSliced(ctx context.Context, x *formats.COO, mode, sliceMode, rank int) (*Plan, error) {
	if x != nil && (sliceMode < 0 || sliceMode >= x.Order() || sliceMode == mode) {
		return nil, fmt.Errorf("ttm: slice mode %d must be another mode of the order-%d tensor than mode %d", sliceMode+1, x.Order(), mode+1)
	}
	return e.planTTM(ctx, x, mode, sliceMode, rank, false)
}

// planTTM is PlanTTM for a plan that runs once (TTM) or many times.
func (e *Engine) planTTM(ctx context.Context, x *formats.COO, mode, sliceMode, rank int, once bool) (*Plan, error) {
	start := time.Now()
	if err := checkInput(x, mode); err != nil {
		return nil, fmt.Errorf("ttm: %w", err)
	}
	if rank < 1 {
		return nil, fmt.Errorf("ttm: rank must be >= 1, found %d", rank)
	}
	fm, err := formats.NewFiberMatrix(x, mode, sliceMode)
	if err != nil {
		return nil, fmt.Errorf("ttm: %w", err)
	}
	if err := kernels.CheckDenseFits(x, "ttm: the plan's operand and output", [2]int{x.Dims[mode], rank}, [2]int{fm.Rows(), rank}); err != nil {
		return nil, err
	}
	ut := placeholders(x.Dims, rank, []int{mode})[mode]
	b := &ttmBinder{fm: fm, slices: fm.Slices(), ut: ut, direct: kernels.NewMatrix(fm.Rows(), rank)}
	p := &Plan{e: e, op: hetero.SpTTM, mode: mode, rank: rank, dims: slices.Clone(x.Dims), nnz: x.NNZ(), b: b, fibers: fm,
		outRows: fm.Rows(), operands: []*kernels.Matrix{ut}, once: once}
	p.sliceNNZ = make([]int64, len(b.slices))
	for i, s := range b.slices {
		p.sliceNNZ[i] = int64(s.NNZ)
	}
	if _, err := e.newPlan(ctx, x, p, nil, start); err != nil {
		return nil, fmt.Errorf("ttm mode %d: %w", mode+1, err)
	}
	return p, nil
}

// placeholders returns zero matrices of the operands' shapes (Dims[m] x
// rank for each mode in modes, nil elsewhere), sharing one zero buffer:
// binding checks the operands' shapes before any run supplies them, and
// Run points them at the caller's data.
func placeholders(dims []int, rank int, modes []int) []*kernels.Matrix {
	most := 0
	for _, m := range modes {
		most = max(most, dims[m])
	}
	zeros := make([]float32, most*rank)
	out := make([]*kernels.Matrix, len(dims))
	for _, m := range modes {
		out[m] = &kernels.Matrix{Rows: dims[m], Cols: rank, Data: zeros[:dims[m]*rank]}
	}
	return out
}

// MTTKRP computes M = X₍ₙ₎(A_N ⊙ … ⊙ A_{n+1} ⊙ A_{n−1} ⊙ … ⊙ A_1) along the
// 0-based mode: factors holds one Dims[m] x R matrix per mode (the mode's
// own is not read and may be nil). The slices of the output mode are split
// between the devices, so each computes whole rows of M and no row is
// summed across devices; Result.Y is M, Dims[mode] x R.
//
// MTTKRP is PlanMTTKRP, one Run and Close, with one difference: the CPU
// runs its share with the COO kernel on the nonzeros in the order they
// came (format source SourceOneRun), not in a format converted for it,
// since any conversion costs many runs of the kernel it would speed up.
// A forced format (Options.Format) is honoured, and an output mode so
// tall that the kernel's private output copies would outweigh the tensor
// converts as a plan does. A caller running the same mode again with new
// factors keeps a plan instead.
func (e *Engine) MTTKRP(ctx context.Context, x *formats.COO, mode int, factors []*kernels.Matrix) (*Result, error) {
	start := time.Now()
	if err := checkInput(x, mode); err != nil {
		return nil, fmt.Errorf("mttkrp: %w", err)
	}
	if len(factors) != x.Order() {
		return nil, fmt.Errorf("mttkrp: %d factor matrices for an order-%d tensor", len(factors), x.Order())
	}
	R := 0
	for m, f := range factors {
		if m == mode {
			continue
		}
		if R == 0 && f != nil {
			R = f.Cols
		}
		if f == nil || f.Cols < 1 || f.Cols != R || f.Rows != x.Dims[m] || len(f.Data) != f.Rows*f.Cols {
			return nil, fmt.Errorf("mttkrp: factor %d must be %d x R with one R >= 1 for all, found %s", m+1, x.Dims[m], shape(f))
		}
	}
	p, err := e.planMTTKRP(ctx, x, mode, R, nil, start, true)
	if err != nil {
		return nil, err
	}
	return p.runOnce(ctx, factors, start)
}

// PlanMTTKRP prepares the MTTKRP of x along the 0-based mode at rank R for
// many runs (see Plan): the nonzeros are grouped by their output-mode
// index, the formats chosen, the slices split, converted and bound on the
// devices. Each Plan.Run then takes one Dims[m] x R factor per mode and
// writes M, Dims[mode] x R.
func (e *Engine) PlanMTTKRP(ctx context.Context, x *formats.COO, mode, rank int) (*Plan, error) {
	start := time.Now()
	if err := checkInput(x, mode); err != nil {
		return nil, fmt.Errorf("mttkrp: %w", err)
	}
	if rank < 1 {
		return nil, fmt.Errorf("mttkrp: rank must be >= 1, found %d", rank)
	}
	return e.planMTTKRP(ctx, x, mode, rank, nil, start, false)
}

// PlanMTTKRPAll plans the MTTKRP of every mode of x at rank R, as
// PlanMTTKRP does one by one, but the format choice learns of the tensor
// once for all modes (one features.Summarize, one key for the decision
// cache), as CP-ALS needs. Plan m is mode m's. On an error the
// plans made so far are closed.
func (e *Engine) PlanMTTKRPAll(ctx context.Context, x *formats.COO, rank int) ([]*Plan, error) {
	if err := checkInput(x, 0); err != nil {
		return nil, fmt.Errorf("mttkrp: %w", err)
	}
	if rank < 1 {
		return nil, fmt.Errorf("mttkrp: rank must be >= 1, found %d", rank)
	}
	in := e.newInput(x, rank)
	plans := make([]*Plan, 0, x.Order())
	for mode := range x.Order() {
		p, err := e.planMTTKRP(ctx, x, mode, rank, in, time.Now(), false)
		if err != nil {
			for _, q := range plans {
				q.Close()
			}
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// planMTTKRP builds the plan of one mode once the input is checked; once
// says it runs once (MTTKRP).
func (e *Engine) planMTTKRP(ctx context.Context, x *formats.COO, mode, rank int, in *input, start time.Time, once bool) (*Plan, error) {
	var modes []int
	for m := range x.Order() {
		if m != mode {
			modes = append(modes, m)
		}
	}
	// What the plan allocates by dims: the operands' shared placeholder
	// (the largest dim's), the output, and the binder's count of nonzeros
	// per output index (ints, two float32s each).
	most := 0
	for _, m := range modes {
		most = max(most, x.Dims[m])
	}
	if err := kernels.CheckDenseFits(x, fmt.Sprintf("mttkrp mode %d: the plan's operands and output", mode+1),
		append([][2]int{{most, rank}, {x.Dims[mode], rank}, {x.Dims[mode], 2}}, kernels.MTTKRPPadShapes(x.Dims, mode, rank)...)...); err != nil {
		return nil, err
	}
	operands := placeholders(x.Dims, rank, modes)
	if in == nil {
		in = e.newInput(x, rank)
	}
	b := newMTTKRPBinder(in, mode, operands, rank)
	p := &Plan{e: e, op: hetero.MTTKRP, mode: mode, rank: rank, dims: slices.Clone(x.Dims), nnz: x.NNZ(), b: b,
		outRows: x.Dims[mode], operands: operands, sliceNNZ: b.sliceNNZ, once: once}
	b.inPlace = once && e.opts.Format == "" &&
		kernels.COOPrivateBytes(x.NNZ(), x.Dims[mode], rank, e.cpu.Info().ComputeUnits) <= x.Bytes()
	p.inPlace = b.inPlace
	if _, err := e.newPlan(ctx, x, p, in, start); err != nil {
		return nil, fmt.Errorf("mttkrp mode %d: %w", mode+1, err)
	}
	return p, nil
}

// checkInput checks the tensor (indices within the dims, finite values:
// the slicing indexes arrays by them) and the mode.
func checkInput(x *formats.COO, mode int) error {
	if x == nil {
		return fmt.Errorf("tensor is nil")
	}
	if err := x.Validate(); err != nil {
		return err
	}
	if x.Order() < 2 {
		return fmt.Errorf("order-%d tensor, expected order 2 or more", x.Order())
	}
	return formats.CheckMode(mode, x.Order())
}

func shape(a *kernels.Matrix) string {
	if a == nil {
		return "nil"
	}
	return fmt.Sprintf("%dx%d (%d values)", a.Rows, a.Cols, len(a.Data))
}

// ttmBinder binds slices of the fiber matrix: a chunk is the rows of its
// slices, and its output rows go back to those rows of Y.
type ttmBinder struct {
	fm     *formats.FiberMatrix
	slices []formats.Slice
	ut, y  *kernels.Matrix
	// direct is the output of a piece holding every slice: the plan owns
	// the header and each run points it at that run's output.
	direct *kernels.Matrix
	// views are the outputs of pieces that are one range of slices, rows
	// [lo, hi) of Y: each run points them at those rows of its output.
	// Both sides bind at once, so mu guards the list.
	mu    sync.Mutex
	views []rowView
}

// rowView is a piece's output header aliasing rows [lo, hi) of Y.
type rowView struct {
	m      *kernels.Matrix
	lo, hi int
}

func (p *ttmBinder) setOut(out *kernels.Matrix) {
	p.y = out
	*p.direct = *out
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.views {
		*v.m = rowsOf(out, v.lo, v.hi)
	}
}

// rowsOf returns rows [lo, hi) of m, sharing its data.
func rowsOf(m *kernels.Matrix, lo, hi int) kernels.Matrix {
	return kernels.Matrix{Rows: hi - lo, Cols: m.Cols, Data: m.Data[lo*m.Cols : hi*m.Cols]}
}

// oneRange reports whether ids are consecutive ascending slice ids.
func oneRange(ids []int) bool {
	for j := 1; j < len(ids); j++ {
		if ids[j] != ids[0]+j {
			return false
		}
	}
	return len(ids) > 0
}

func (p *ttmBinder) bind(d hetero.Device, ids []int, format string) (*bound, error) {
	start := time.Now()
	// A piece of every slice is the whole fiber matrix, whose rows are
	// Y's: it is converted as it is and its job writes the run's output
	// directly, with no copy of the matrix nor gather.
	whole := len(ids) == len(p.slices)
	sub := p.fm
	if !whole {
		var err error
		if sub, err = p.fm.SelectSlices(ids); err != nil {
			return nil, err
		}
	}
	b := &bound{format: format}
	if format == "ell" {
		// One long fiber pads every row of an ELL to its length; the
		// formats package refuses to build one past this many slots per
		// nonzero, and HYB is ELL with the long rows' tails cut off.
		if slots := int64(sub.Rows()) * int64(sub.MaxRowLen()); slots > formats.MaxELLSlotsPerNNZ*int64(max(sub.NNZ(), 1)) {
			b.format = "hyb"
			// One message whatever the chunk, so a dynamic run warns once.
			b.formatFallback = fmt.Sprintf("ell would hold over %d slots per nonzero: using hyb", formats.MaxELLSlotsPerNNZ)
		}
	}
	f, err := formats.NewFiberFormat(sub, b.format)
	if err != nil {
		return nil, err
	}
	b.convert = time.Since(start)
	R := p.ut.Cols
	out := p.direct
	inPlace := whole || oneRange(ids)
	if !inPlace {
		out = kernels.NewMatrix(sub.Rows(), R)
	} else if !whole {
		// One range of slices is one range of Y's rows: the job writes
		// them in place, through a header each run re-points.
		lo, hi := p.slices[ids[0]].RowStart, p.slices[ids[len(ids)-1]].RowEnd
		view := rowsOf(p.direct, lo, hi)
		out = &view
		p.mu.Lock()
		p.views = append(p.views, rowView{out, lo, hi})
		p.mu.Unlock()
	}
	start = time.Now()
	if b.job, err = d.SpTTM(f, p.ut, out); err != nil {
		return nil, err
	}
	b.setup = time.Since(start)
	if inPlace {
		b.gather = func() {}
		return b, nil
	}
	// off[j] is where slice ids[j]'s rows start in the job's output.
	off := make([]int, len(ids)+1)
	for j, id := range ids {
		s := p.slices[id]
		off[j+1] = off[j] + (s.RowEnd-s.RowStart)*R
	}
	b.gather = func() {
		par.Range(len(ids), gatherParts(off[len(ids)]), func(_, lo, hi int) {
			for j := lo; j < hi; j++ {
				at := p.slices[ids[j]].RowStart * R
				copy(p.y.Data[at:at+off[j+1]-off[j]], out.Data[off[j]:off[j+1]])
			}
		})
	}
	return b, nil
}

// mttkrpBinder binds slices of the output mode: a chunk is the nonzeros of
// its slices, as a tensor whose output mode is renumbered to the chunk's
// slices (so a device's output is one row per slice it owns), and its
// output rows go back to those rows of M.
type mttkrpBinder struct {
	rank    int
	x       *formats.COO
	mode    int
	factors []*kernels.Matrix
	out     *kernels.Matrix
	// Slice s is the output-mode index index[s], its nonzeros
	// order()[ptr[s]:ptr[s+1]] (positions in x) and sliceNNZ[s] of them.
	index    []uint32
	ptr      []int
	sliceNNZ []int64
	// byIndex holds the positions of x's nonzeros grouped by output
	// index, made by order on first use: only a piece of some slices
	// needs it, and a plan whose one piece is the tensor (one device, or
	// a split that gives one side everything) would pay a scatter of
	// every nonzero for nothing (8-10 ms at 2 M nonzeros).
	byIndex     []uint32
	byIndexOnce sync.Once
	// empty are the output rows no slice covers: every run zeroes them.
	empty []int
	// direct is the output of a piece holding every slice, as for
	// ttmBinder.
	direct *kernels.Matrix
	// inPlace says the CPU's pieces run the COO kernel on their nonzeros
	// as they are, with no sorted copy (a plan run once: Engine.MTTKRP).
	inPlace bool
	// in is the format choice's input (its x is x), shared by the plans
	// of every mode PlanMTTKRPAll makes: the whole tensor is converted
	// through its Converter, so a mode-free format is converted once for
	// all of them.
	in *input
}

func (p *mttkrpBinder) setOut(out *kernels.Matrix) {
	p.out = out
	*p.direct = *out
	for _, i := range p.empty {
		clear(out.Row(i))
	}
}

// newMTTKRPBinder groups the nonzeros by their output-mode index, a
// counting sort, keeping the non-empty indices as slices. The jobs it
// binds read factors, whose own mode is nil.
func newMTTKRPBinder(in *input, mode int, factors []*kernels.Matrix, R int) *mttkrpBinder {
	x := in.x
	p := &mttkrpBinder{x: x, in: in, mode: mode, factors: factors, rank: R, direct: kernels.NewMatrix(x.Dims[mode], R)}
	p.factors[mode] = nil // the output mode is renumbered per chunk; no kernel reads its factor
	count := countIndices(x.Inds[mode], x.Dims[mode])
	p.ptr = []int{0}
	for i, c := range count {
		if c == 0 {
			p.empty = append(p.empty, i)
			continue
		}
		p.index = append(p.index, uint32(i))
		p.sliceNNZ = append(p.sliceNNZ, int64(c))
		p.ptr = append(p.ptr, p.ptr[len(p.ptr)-1]+c)
	}
	return p
}

// countIndices returns how many times each index below dim occurs in ind.
// Chunks count into counts of their own, in parallel, where dim is small
// next to the chunks (the sum of the counts costs a pass over dim per
// chunk): the serial count was a fifth of a one-run MTTKRP's preparation
// at 7 M nonzeros.
func countIndices(ind []uint32, dim int) []int {
	const grain = 1 << 16
	parts := max(1, min(runtime.GOMAXPROCS(0), len(ind)/grain, len(ind)/max(dim, 1)/4))
	if len(ind) == 0 {
		return make([]int, dim)
	}
	counts := make([][]int, parts)
	par.Range(len(ind), parts, func(p, lo, hi int) {
		c := make([]int, dim)
		for _, i := range ind[lo:hi] {
			c[i]++
		}
		counts[p] = c
	})
	total := counts[0]
	for _, c := range counts[1:] {
		for i, v := range c {
			total[i] += v
		}
	}
	return total
}

// order returns the positions of x's nonzeros grouped by output index, in
// slice order (slice s's are order()[ptr[s]:ptr[s+1]]), made on first use.
func (p *mttkrpBinder) order() []uint32 {
	p.byIndexOnce.Do(func() {
		ind := p.x.Inds[p.mode]
		slot := make([]int, p.x.Dims[p.mode]) // where index i's nonzeros go next
		for s, i := range p.index {
			slot[i] = p.ptr[s]
		}
		p.byIndex = make([]uint32, len(ind))
		for k, i := range ind {
			p.byIndex[slot[i]] = uint32(k)
			slot[i]++
		}
	})
	return p.byIndex
}

func (p *mttkrpBinder) bind(d hetero.Device, ids []int, format string) (*bound, error) {
	start := time.Now()
	x, N := p.x, p.x.Order()
	nnz := 0
	for _, id := range ids {
		nnz += p.ptr[id+1] - p.ptr[id]
	}
	if len(ids) == len(p.index) {
		// A piece of every slice is the tensor itself: it is converted
		// as it is (formats copy, never change, their input), without a
		// renumbered copy, and its job writes the run's output directly.
		return p.bindWhole(d, format, start)
	}
	dims := slices.Clone(x.Dims)
	dims[p.mode] = len(ids)
	sub := &formats.COO{Dims: dims, Inds: make([][]uint32, N), Vals: make([]float32, 0, nnz)}
	for m := range sub.Inds {
		sub.Inds[m] = make([]uint32, 0, nnz)
	}
	for j, id := range ids {
		for _, k := range p.order()[p.ptr[id]:p.ptr[id+1]] {
			for m := range N {
				v := x.Inds[m][k]
				if m == p.mode {
					v = uint32(j)
				}
				sub.Inds[m] = append(sub.Inds[m], v)
			}
			sub.Vals = append(sub.Vals, x.Vals[k])
		}
	}
	// The piece's nonzeros come grouped by output index, as a rooted COO
	// has them: in place, the COO kernel runs them as they are.
	var f formats.TensorFormat = sub
	var err error
	if !p.runsInPlace(d, format) {
		if f, err = formats.NewTensorFormat(sub, format, p.mode); err != nil {
			return nil, err
		}
	}
	b := &bound{format: format, convert: time.Since(start)}
	out := kernels.NewMatrix(len(ids), p.rank)
	start = time.Now()
	if b.job, err = d.MTTKRP(f, p.mode, p.factors, out); err != nil {
		return nil, err
	}
	b.setup = time.Since(start)
	b.gather = func() {
		par.Range(len(ids), gatherParts(len(ids)*p.rank), func(_, lo, hi int) {
			for j := lo; j < hi; j++ {
				copy(p.out.Row(int(p.index[ids[j]])), out.Row(j))
			}
		})
	}
	return b, nil
}

// bindWhole binds the whole tensor, output mode as it is, writing into
// the run's output. A mode-free format (HiCOO, ALTO) comes from the
// input's conversion, made by the first mode's plan that asks for it: in
// CP-ALS under auto, the modes that pick it share one copy, as with a
// fixed format, where each used to convert its own (the conversion is
// most of a plan's setup, and N copies held N times the memory).
func (p *mttkrpBinder) bindWhole(d hetero.Device, format string, start time.Time) (*bound, error) {
	var f formats.TensorFormat = p.x
	var err error
	if !p.runsInPlace(d, format) {
		if f, err = p.in.conv.Format(format, p.mode); err != nil {
			return nil, err
		}
	}
	b := &bound{format: format, convert: time.Since(start), gather: func() {}}
	start = time.Now()
	if b.job, err = d.MTTKRP(f, p.mode, p.factors, p.direct); err != nil {
		return nil, err
	}
	b.setup = time.Since(start)
	return b, nil
}

// runsInPlace reports whether the device runs format on a piece's
// nonzeros as they are: the CPU's COO in a plan run once.
func (p *mttkrpBinder) runsInPlace(d hetero.Device, format string) bool {
	return p.inPlace && format == "coo" && d.Info().Kind == hetero.CPU
}

// gatherParts is how many goroutines copy a piece's floats into the
// result: a gather of a large piece is a memory copy that one core does
// at a fraction of the machine's bandwidth (a serial gather of SpTTM's
// rows had cost several times the kernel), a small one is not worth the
// start-up.
func gatherParts(floats int) int {
	const perPart = 1 << 16 // 256 KiB
	return max(1, min(runtime.GOMAXPROCS(0), floats/perPart))
}
