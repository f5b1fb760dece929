package decomp

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/kernels"
)

// MTTKRPer computes the MTTKRPs of one tensor:
//
//	out = X_(mode) (A_N ⊙ … ⊙ A_{mode+1} ⊙ A_{mode-1} ⊙ … ⊙ A_1)
//
// for a 0-based mode, in float32, where factors holds one Dims[m] x R
// matrix per mode (factors[mode] is not read) and out is Dims[mode] x R,
// overwritten. An implementation converts the tensor into its formats once
// (per mode at most), not once per call, and keeps its kernel plans: CP-ALS
// calls it N times per iteration with the same shapes.
//
// CPU is the implementation decomp uses by default; EngineKernels runs
// them through package engine, picking the format per mode and device.
type MTTKRPer interface {
	MTTKRP(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error
}

// Distributed is an MTTKRPer over a tensor spread over the parts of a
// job (the ranks of package dist), of which CPALS is given one part's
// block. Each part holds only some rows of each factor (Own): its MTTKRP
// gives the whole tensor's product in those rows, and the statistics
// CP-ALS needs over all rows (column norms, Gram matrices, the fit's
// inner product) are combined across the parts by SumRows and MaxRows.
// CPALS then accepts a block with no nonzeros, takes the whole tensor's
// norm from NormSq, refuses the HOSVD initialisation (which needs the
// whole tensor), and gathers the whole factors (Gather) only once, at the
// end.
type Distributed interface {
	MTTKRPer
	// NormSq returns the whole tensor's squared Frobenius norm.
	NormSq() float64
	// Own zeroes the rows of a, mode's factor, that this part does not
	// hold.
	Own(mode int, a *kernels.Matrix)
	// SumRows and MaxRows combine v, a statistic of this part's rows of
	// mode's factor, with the other parts' by sum or max, so that every
	// part holds the statistic of the whole factor.
	SumRows(mode int, v []float64) error
	MaxRows(mode int, v []float64) error
	// AllOK reports whether every part reports ok: a decision every part
	// must take alike.
	AllOK(ok bool) (bool, error)
	// Gather fills in the rows of a, mode's factor, held by other parts.
	Gather(mode int, a *kernels.Matrix) error
	// Rows returns the rows [lo, hi) of mode's factor this part holds:
	// the dense steps touch only those, so their cost falls with the
	// part's share.
	Rows(mode int) (lo, hi int)
}

// TTMChainer computes the TTM chains of one tensor, Tucker's sparse kernel:
//
//	Y = X ×_1 U_1ᵀ … ×_{mode-1} U_{mode-1}ᵀ ×_{mode+1} U_{mode+1}ᵀ … ×_N U_Nᵀ
//
// matricised in the 0-based mode, in float32: out is Dims[mode] x P,
// P = Π_{m≠mode} R_m, where factors[m] is Dims[m] x R_m (factors[mode] is
// not read). Column c of out indexes the other modes' ranks in increasing
// mode order, the last varying fastest (C order of the core with mode
// removed). Like MTTKRPer, an implementation converts once and keeps its
// plans.
type TTMChainer interface {
	TTMChain(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error
}

// mttkrpPreparer and ttmPreparer are what CPU and EngineKernels implement
// beside the kernels: building every format and plan ahead, so the first
// iteration's time is not the conversion's and setup is reported apart.
// Kernels supplied from outside need not implement them.
//
// They are given the tensor being decomposed too: kernels built for
// another would answer with that one's MTTKRPs and TTMs.
type mttkrpPreparer interface {
	prepareMTTKRP(x *formats.COO, rank int) error
}

type ttmPreparer interface {
	prepareTTMChain(x *formats.COO, ranks []int) error
}

// errOtherTensor is what prepareMTTKRP and prepareTTMChain give kernels
// built for another tensor than the one decomposed.
var errOtherTensor = errors.New("the kernels (Options.MTTKRP or Options.TTMChain) were built for another tensor than the one decomposed")

// CPU runs decomp's sparse kernels with package kernels on the CPU.
//
// MTTKRP: the tensor is converted into the format named for each mode
// (a formats.Converter) the first time that mode is asked for, and a
// kernels.MTTKRP plan is kept per mode. Formats that do not depend on the
// mode (ALTO, HiCOO) are converted once and shared by every mode, so the
// default, ALTO everywhere, holds one copy of the tensor; CSF and COO are
// laid out per mode (rooted at, or sorted by, the output mode), N copies,
// the CSFs' leaves placed by fiber counts made once.
//
// TTM chain of mode n: the first product is a kernels.SpTTM on the fiber
// matrix of the mode p ≠ n with the fewest fibers (so the semi-sparse
// intermediate has the fewest rows), with rows grouped by mode n's index
// (formats.NewFiberMatrix(x, p, n)). Every row of the intermediate is one
// length-R_p vector y at a coordinate (i_m, m ≠ p); the remaining products
// are dense: out(i_n, :) += y ⊗ U_m(i_m, :) ⊗ … over the other modes in
// increasing mode order. Grouping rows by i_n makes each output row the
// sum of one contiguous run of rows, so goroutines own whole output rows.
// One fiber matrix, format and SpTTM plan are kept per output mode.
//
// A CPU is not safe for concurrent use.
type CPU struct {
	x           *formats.COO
	threads     int
	formats     []string // per mode
	fiberFormat string

	conv  *formats.Converter     // shares conversions between modes
	tf    []formats.TensorFormat // per mode; mode-independent formats share one value
	plans []*kernels.MTTKRP      // per mode, for the rank last asked for
	ttm   []*ttmPlan             // per output mode
	fiber []int                  // per mode: number of non-empty mode-m fibers, computed on demand

	setup time.Duration
}

// ttmPlan is the TTM chain of one output mode.
type ttmPlan struct {
	fm      *formats.FiberMatrix
	p       int // the mode the SpTTM contracts
	plan    *kernels.SpTTM
	rank    int             // R_p of the plan
	y       *kernels.Matrix // SpTTM output, fm.Rows() x R_p
	slices  []formats.Slice
	splits  []int // per goroutine: slices[splits[t]:splits[t+1]]
	scratch [][]float64
}

// NewCPU returns the CPU kernels of x. formatNames are the MTTKRP formats
// per mode (nil: DefaultMTTKRPFormat; one name: every mode), fiberFormat
// the SpTTM format of the TTM chain ("": DefaultFiberFormat), threads the
// goroutines per kernel (0: GOMAXPROCS). Nothing is converted until a mode
// is first used (or CPALS and TuckerHOOI prepare them all before timing).
func NewCPU(x *formats.COO, formatNames []string, fiberFormat string, threads int) (*CPU, error) {
	c := &CPU{x: x, threads: threads, fiberFormat: fiberFormat}
	n := x.Order()
	switch len(formatNames) {
	case 0:
		formatNames = []string{DefaultMTTKRPFormat}
		fallthrough
	case 1:
		c.formats = slices.Repeat([]string{formatNames[0]}, n)
	case n:
		c.formats = slices.Clone(formatNames)
	default:
		return nil, fmt.Errorf("%d MTTKRP formats for a tensor of order %d: give one, or one per mode", len(formatNames), n)
	}
	for m, f := range c.formats {
		if !slices.Contains(formats.TensorFormatNames, f) {
			return nil, fmt.Errorf("MTTKRP format %q of mode %d: must be one of %v", f, m+1, formats.TensorFormatNames)
		}
	}
	if c.fiberFormat == "" {
		c.fiberFormat = DefaultFiberFormat
	}
	if c.fiberFormat != "coo" && !slices.Contains(formats.FiberFormatNames, c.fiberFormat) {
		return nil, fmt.Errorf("SpTTM format %q: must be one of %v", c.fiberFormat, formats.FiberFormatNames)
	}
	c.conv = formats.NewConverter(x)
	c.tf = make([]formats.TensorFormat, n)
	c.plans = make([]*kernels.MTTKRP, n)
	c.ttm = make([]*ttmPlan, n)
	return c, nil
}

// SetupSeconds returns the time spent so far converting the tensor and
// building plans.
func (c *CPU) SetupSeconds() float64 { return c.setup.Seconds() }

// Formats returns the MTTKRP format of each mode.
func (c *CPU) Formats() []string { return slices.Clone(c.formats) }

// mttkrpPlan returns mode's plan for rank, converting and planning on
// first use or when the rank changed.
func (c *CPU) mttkrpPlan(mode, rank int) (*kernels.MTTKRP, error) {
	if p := c.plans[mode]; p != nil && p.Rank() == rank {
		return p, nil
	}
	start := time.Now()
	defer func() { c.setup += time.Since(start) }()
	if c.tf[mode] == nil {
		name := c.formats[mode]
		tf, err := c.conv.Format(name, mode)
		if err != nil {
			return nil, fmt.Errorf("convert to %s for mode %d: %w", name, mode+1, err)
		}
		c.tf[mode] = tf
	}
	p, err := kernels.NewMTTKRP(c.tf[mode], mode, rank, c.threads)
	if err != nil {
		return nil, fmt.Errorf("MTTKRP plan of mode %d: %w", mode+1, err)
	}
	c.plans[mode] = p
	return p, nil
}

// MTTKRP implements MTTKRPer.
func (c *CPU) MTTKRP(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error {
	if mode < 0 || mode >= c.x.Order() {
		return fmt.Errorf("MTTKRP mode %d out of range for order %d", mode, c.x.Order())
	}
	if out == nil {
		return fmt.Errorf("MTTKRP of mode %d: output is nil", mode+1)
	}
	p, err := c.mttkrpPlan(mode, out.Cols)
	if err != nil {
		return err
	}
	return p.Run(out, factors)
}

func (c *CPU) prepareMTTKRP(x *formats.COO, rank int) error {
	if x != c.x {
		return errOtherTensor
	}
	for m := range c.x.Order() {
		if _, err := c.mttkrpPlan(m, rank); err != nil {
			return err
		}
	}
	return nil
}

func (c *CPU) prepareTTMChain(x *formats.COO, ranks []int) error {
	if x != c.x {
		return errOtherTensor
	}
	for m := range c.x.Order() {
		if _, err := c.ttmPlanFor(m, ranks); err != nil {
			return err
		}
	}
	return nil
}

// ttmPlanFor returns the TTM chain plan of output mode n for the ranks
// (ranks[m] columns of factor m), building it on first use.
func (c *CPU) ttmPlanFor(n int, ranks []int) (*ttmPlan, error) {
	tp := c.ttm[n]
	if tp != nil && tp.rank == ranks[tp.p] {
		return tp, nil
	}
	start := time.Now()
	defer func() { c.setup += time.Since(start) }()
	if tp == nil {
		if c.fiber == nil {
			c.fiber = make([]int, c.x.Order())
		}
		p, err := chainContraction(c.x, n, c.fiber)
		if err != nil {
			return nil, err
		}
		fm, err := formats.NewFiberMatrix(c.x, p, n)
		if err != nil {
			return nil, fmt.Errorf("fiber matrix of mode %d for the TTM chain of mode %d: %w", p+1, n+1, err)
		}
		tp = newTTMPlan(fm, p, c.parts())
	}
	ff, err := formats.NewFiberFormat(tp.fm, c.fiberFormat)
	if err != nil {
		return nil, fmt.Errorf("%s fiber matrix of mode %d: %w", c.fiberFormat, tp.p+1, err)
	}
	plan, err := kernels.NewSpTTM(ff, ranks[tp.p], c.threads)
	if err != nil {
		return nil, fmt.Errorf("SpTTM plan of mode %d: %w", tp.p+1, err)
	}
	tp.plan, tp.rank = plan, ranks[tp.p]
	tp.y = kernels.NewMatrix(tp.fm.Rows(), tp.rank)
	c.ttm[n] = tp
	return tp, nil
}

func (c *CPU) parts() int { return resolvedThreads(c.threads) }

// chainContraction returns the mode the TTM chain of output mode n of x
// contracts first: the one whose fiber matrix has the fewest rows, so the
// SpTTM output, and the dense work after it, is smallest. fibers[m]
// caches the count of non-empty mode-m fibers (0: not counted yet).
func chainContraction(x *formats.COO, n int, fibers []int) (int, error) {
	p := -1
	for m := range x.Order() {
		if m == n {
			continue
		}
		if fibers[m] == 0 {
			st, err := x.ModeStats(m)
			if err != nil {
				return 0, err
			}
			fibers[m] = st.Fibers.Count
		}
		if p < 0 || fibers[m] < fibers[p] {
			p = m
		}
	}
	return p, nil
}

// newTTMPlan returns the dense side of a TTM chain over fm, the fiber
// matrix of the contracted mode p sliced by the output mode, with its
// slices cut for parts goroutines; the caller supplies the SpTTM.
func newTTMPlan(fm *formats.FiberMatrix, p, parts int) *ttmPlan {
	tp := &ttmPlan{fm: fm, p: p, slices: fm.Slices()}
	tp.splits = splitSlices(tp.slices, parts)
	tp.scratch = make([][]float64, len(tp.splits)-1)
	return tp
}

// checkChain checks the TTM chain's arguments: the mode, one factor per
// mode (the output mode's is not read) and out, Dims[n] x the product of
// the other factors' columns. It returns the factors' ranks.
func checkChain(x *formats.COO, n int, factors []*kernels.Matrix, out *kernels.Matrix) ([]int, error) {
	N := x.Order()
	if n < 0 || n >= N {
		return nil, fmt.Errorf("TTM chain mode %d out of range for order %d", n+1, N)
	}
	if len(factors) != N {
		return nil, fmt.Errorf("TTM chain: %d factors for order %d", len(factors), N)
	}
	ranks := make([]int, N)
	P := 1
	for m, f := range factors {
		if m == n {
			continue
		}
		if f == nil || f.Rows != x.Dims[m] || len(f.Data) != f.Rows*f.Cols || f.Cols < 1 {
			return nil, fmt.Errorf("TTM chain: factor of mode %d is not a %dx(R>0) matrix", m+1, x.Dims[m])
		}
		ranks[m] = f.Cols
		P *= f.Cols
	}
	if out == nil || out.Rows != x.Dims[n] || out.Cols != P || len(out.Data) != out.Rows*out.Cols {
		return nil, fmt.Errorf("TTM chain of mode %d: output must be %dx%d", n+1, x.Dims[n], P)
	}
	return ranks, nil
}

// dense finishes the chain of output mode n once tp.y holds the SpTTM of
// mode tp.p: each slice's rows, multiplied out with the other factors'
// rows (a Kronecker product), summed into its row of out. Rows of out
// that no slice covers are zero.
func (tp *ttmPlan) dense(n int, factors []*kernels.Matrix, out *kernels.Matrix) {
	P := out.Cols
	clear(out.Data)
	fm := tp.fm
	// FiberModes is the slice mode n first, then the modes other than n
	// and p in increasing order: row r's coordinates in the modes whose
	// factor rows enter the Kronecker product beside the SpTTM row.
	others := fm.FiberModes[1:]
	par.Range(len(tp.splits)-1, len(tp.splits)-1, func(t, _, _ int) {
		kron := tp.scratch[t]
		if len(kron) < 2*P {
			kron = make([]float64, 2*P)
			tp.scratch[t] = kron
		}
		acc, tmp := kron[:P], kron[P:2*P]
		for _, s := range tp.slices[tp.splits[t]:tp.splits[t+1]] {
			clear(acc)
			for r := s.RowStart; r < s.RowEnd; r++ {
				kronRow(tmp, n, tp.p, others, fm.FiberInds[1:], r, tp.y.Row(r), factors)
				for k, v := range tmp {
					acc[k] += v
				}
			}
			dst := out.Row(int(s.Index))
			for k, v := range acc {
				dst[k] = float32(v)
			}
		}
	})
}

// splitSlices cuts slices into parts contiguous runs of about equal rows
// (the dense work of a row is the same for every row) and returns parts+1
// offsets into slices.
func splitSlices(sl []formats.Slice, parts int) []int {
	total := 0
	if len(sl) > 0 {
		total = sl[len(sl)-1].RowEnd
	}
	splits := make([]int, parts+1)
	s := 0
	for t := 1; t < parts; t++ {
		target := total * t / parts
		for s < len(sl) && sl[s].RowStart < target {
			s++
		}
		splits[t] = s
	}
	splits[parts] = len(sl)
	return splits
}

// TTMChain implements TTMChainer.
func (c *CPU) TTMChain(mode int, factors []*kernels.Matrix, out *kernels.Matrix) error {
	ranks, err := checkChain(c.x, mode, factors, out)
	if err != nil {
		return err
	}
	tp, err := c.ttmPlanFor(mode, ranks)
	if err != nil {
		return err
	}
	if err := tp.plan.Run(tp.y, factors[tp.p]); err != nil {
		return err
	}
	tp.dense(mode, factors, out)
	return nil
}

// kronRow writes into dst (length P) the Kronecker product, over the modes
// other than n in increasing order, of the SpTTM row y (mode p) and the
// factor rows U_m(i_m, :) of row r's coordinates (others[j] at
// inds[j][r]).
func kronRow(dst []float64, n, p int, others []int, inds [][]uint32, r int, y []float32, factors []*kernels.Matrix) {
	size := 1
	dst[0] = 1
	j := 0
	for m := range len(factors) {
		if m == n {
			continue
		}
		var v []float32
		if m == p {
			v = y
		} else {
			for others[j] != m {
				j++
			}
			v = factors[m].Row(int(inds[j][r]))
		}
		// Expand in place from the back, so every old entry is read before
		// it is overwritten: new[a*R+b] = old[a]*v[b].
		R := len(v)
		for a := size - 1; a >= 0; a-- {
			old := dst[a]
			row := dst[a*R : a*R+R]
			for b, vb := range v {
				row[b] = old * float64(vb)
			}
		}
		size *= R
	}
}
