package decomp

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/kernels"
)

// CPResult is a CP model [[λ; A_1, …, A_N]] of a tensor:
// X ≈ Σ_r λ_r a_1r ∘ … ∘ a_Nr.
type CPResult struct {
	// Factors holds one Dims[m] x R float32 matrix per mode (row-major, the
	// layout the kernels take). CPALS leaves each column with unit 2-norm,
	// its largest-magnitude entry positive in every mode but the last;
	// CPAPR leaves each column non-negative with unit 1-norm (sum 1).
	Factors []*kernels.Matrix
	// Lambda holds the components' weights, largest first.
	Lambda []float64
	// Fit is 1 - ‖X - model‖/‖X‖ (CPALS).
	Fit float64
	// LogLikelihood and KKTViolation are CPAPR's final values.
	LogLikelihood float64
	KKTViolation  float64
	// Iterations is the number of (outer) iterations run.
	Iterations int
	// Converged reports whether the Tol test stopped the run before Iters.
	Converged bool
	// History has one entry per iteration.
	History []IterStat
	// SetupSeconds is the time spent converting the tensor and building
	// kernel plans before the first iteration (0 for supplied kernels
	// that do not prepare ahead; EngineKernels does).
	SetupSeconds float64
	// PseudoInverses counts the CP-ALS solves that fell back from Cholesky
	// to the pseudo-inverse (ill-conditioned or singular systems).
	PseudoInverses int
	// PhiFormats holds, per mode, the layout CPAPR computed Φ over in the
	// last iteration: PhiCOO, PhiCSF, or "coo@DEVICE" on an accelerator.
	PhiFormats []string
	// Warnings says what went differently from what was asked (an
	// accelerator that failed, its work redone on the CPU).
	Warnings []string
}

// CPALS computes a rank-R CP decomposition of x by alternating least
// squares.
//
// Each iteration updates the modes in turn: for mode n, M = MTTKRP(n) with
// the current factors, then A_n = M V⁺ with V the Hadamard product of the
// other factors' Gram matrices A_mᵀA_m. V is inverted by Cholesky, or by the
// SVD pseudo-inverse truncated at σ_max/1e6 when Cholesky fails or V's
// condition number exceeds 1e6 (the limit float32 factors can resolve; see
// maxCond), so a rank-deficient problem gives finite, least-norm factors,
// never NaN. The columns of A_n are then normalised into λ: by their 2-norm in the
// first iteration, by max(1, max |entry|) after (the normalisation of the
// Tensor Toolbox's cp_als, which keeps λ from drifting without rescaling
// small columns), except that a column whose entries all fall below 2^-20
// is normalised by its largest, so that data of any scale float32 holds
// keep the factors' products in its range (tinyColumn).
//
// Fit = 1 - ‖X - [[λ; A]]‖/‖X‖ is computed without forming the model:
// ‖X‖² from the values, ⟨X, model⟩ = Σ_r λ_r Σ_i M(i, r) A_N(i, r) from the
// last mode's MTTKRP and updated factor, and ‖model‖² = λᵀ(∗_m A_mᵀA_m)λ
// from the Gram matrices. The run stops when |Δfit| < Tol (Tol > 0) or
// after Iters iterations.
//
// With LineSearch, from the second iteration on, the factors are also
// extrapolated along the sweep's step, Y = P + s(C - P) with P the factors
// before the sweep, C after it (λ folded into the last mode) and
// s = (k+1)^(1/3) at iteration k; Y's fit costs one more MTTKRP, and Y
// replaces C only if its fit is not lower.
//
// The MTTKRPs come from opts.MTTKRP, or from a CPU built with opts.Formats
// (ALTO by default, one tensor copy for all modes) that converts the tensor
// once before the first iteration.
func CPALS(x *formats.COO, opts Options) (*CPResult, error) {
	dist, isDist := opts.MTTKRP.(Distributed)
	var normX2 float64 // ‖X‖²; a distributed run's is summed over the parts below
	if isDist {
		if err := checkPart(x); err != nil {
			return nil, err
		}
		if opts.Init == InitHOSVD && opts.InitFactors == nil {
			return nil, errors.New("the HOSVD initialisation needs the whole tensor: a distributed CP-ALS starts from random factors or given ones")
		}
	} else {
		var err error
		if normX2, err = checkTensor(x); err != nil {
			return nil, err
		}
	}
	if err := checkCommon(opts); err != nil {
		return nil, err
	}
	if opts.Rank < 1 {
		return nil, fmt.Errorf("rank must be >= 1, found %d", opts.Rank)
	}
	o := opts.resolve()
	N, R := x.Order(), o.Rank
	ranks := make([]int, N)
	for m := range ranks {
		ranks[m] = R
	}

	// Per mode: the factor and the MTTKRP output, and with the line
	// search the trial factor.
	copies := 2
	if o.LineSearch {
		copies = 3
	}
	cols := make([]int, N)
	for m := range cols {
		cols[m] = copies * R
	}
	// The R x R matrices: a Gram matrix per mode, one per thread while
	// it is summed, and the normal equations' Hadamard product, its
	// Cholesky factor, inverse and, when singular, SVD.
	if err := checkDense(x, "CP-ALS", "the R x R Gram matrices", cols, squares(N+o.threads+8, R)); err != nil {
		return nil, err
	}

	kern := o.MTTKRP
	res := &CPResult{}
	if kern == nil {
		cpu, err := NewCPU(x, o.Formats, o.FiberFormat, o.Threads)
		if err != nil {
			return nil, err
		}
		kern = cpu
	}
	factors, err := initCP(x, o, ranks)
	if err != nil {
		return nil, err
	}
	if p, ok := kern.(mttkrpPreparer); ok {
		start := time.Now()
		if err := p.prepareMTTKRP(x, R); err != nil {
			return nil, err
		}
		res.SetupSeconds = time.Since(start).Seconds()
	}

	s := &cpState{x: x, o: o, kern: kern, N: N, R: R, factors: factors, res: res}
	if isDist {
		s.dist = dist
		for m, f := range factors {
			dist.Own(m, f)
		}
	}
	s.normX2 = normX2
	if isDist {
		if s.normX2 = dist.NormSq(); !(s.normX2 > 0) || math.IsInf(s.normX2, 0) {
			return nil, fmt.Errorf("the distributed tensor's squared norm is %v: it needs finite values, not all zero", s.normX2)
		}
	}
	s.mtt = make([]*kernels.Matrix, N)
	s.grams = make([][]float64, N)
	for m := range N {
		s.mtt[m] = kernels.NewMatrix(x.Dims[m], R)
		s.grams[m] = gram(s.view(m, factors[m]), o.threads)
		if err := s.sumRows(m, s.grams[m]); err != nil {
			return nil, err
		}
	}
	s.lambda = make([]float64, R)
	for r := range s.lambda {
		s.lambda[r] = 1
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	if s.stopped != nil && res.Iterations == 0 {
		return nil, s.stopped
	}
	if isDist {
		for m, f := range s.factors {
			if err := dist.Gather(m, f); err != nil {
				return nil, err
			}
		}
	}
	finishCP(res, s.factors, s.lambda, o.threads)
	res.Fit = s.fit
	return res, s.stopped
}

// initCP returns the starting factors of a CP method.
func initCP(x *formats.COO, o resolved, ranks []int) ([]*kernels.Matrix, error) {
	if o.InitFactors != nil {
		if err := checkInitFactors(x, o.InitFactors, ranks); err != nil {
			return nil, err
		}
		fs := make([]*kernels.Matrix, len(o.InitFactors))
		for m, f := range o.InitFactors {
			fs[m] = cloneMatrix(f)
		}
		return fs, nil
	}
	if o.Init == InitHOSVD {
		fs := make([]*kernels.Matrix, x.Order())
		for m := range fs {
			f, err := hosvdFactor(x, m, ranks[m], o.Seed, o.threads)
			if err != nil {
				return nil, err
			}
			fs[m] = f
		}
		return fs, nil
	}
	return randomFactors(x.Dims, ranks, o.Seed), nil
}

// cpState is a CP-ALS run in progress.
type cpState struct {
	x       *formats.COO
	o       resolved
	kern    MTTKRPer
	N, R    int
	factors []*kernels.Matrix
	lambda  []float64
	grams   [][]float64
	mtt     []*kernels.Matrix
	normX2  float64
	fit     float64
	res     *CPResult

	kernelTime time.Duration // of the iteration in progress
	prev       []*kernels.Matrix
	trial      []*kernels.Matrix

	// dist, for a distributed run, combines the statistics of the rows
	// each part holds; nil when every row is here.
	dist Distributed

	stopped error // the Context's, when it ended the run early
}

// view returns the rows of a (mode's factor, or a matrix shaped like it)
// that this run holds: all of them, or a distributed part's (Rows). The
// view shares a's data.
func (s *cpState) view(mode int, a *kernels.Matrix) *kernels.Matrix {
	if s.dist == nil {
		return a
	}
	lo, hi := s.dist.Rows(mode)
	return &kernels.Matrix{Rows: hi - lo, Cols: a.Cols, Data: a.Data[lo*a.Cols : hi*a.Cols]}
}

// sumRows and maxRows make v, computed over the rows of mode's factor at
// hand, the whole factor's statistic (see Distributed).
func (s *cpState) sumRows(mode int, v []float64) error {
	if s.dist == nil {
		return nil
	}
	return s.dist.SumRows(mode, v)
}

func (s *cpState) maxRows(mode int, v []float64) error {
	if s.dist == nil {
		return nil
	}
	return s.dist.MaxRows(mode, v)
}

// allOK is ok, agreed by every part of a distributed run.
func (s *cpState) allOK(ok bool) (bool, error) {
	if s.dist == nil {
		return ok, nil
	}
	return s.dist.AllOK(ok)
}

// colNorms returns the 2-norms of a's columns (mode's factor).
func (s *cpState) colNorms(mode int, a *kernels.Matrix) ([]float64, error) {
	norms := columnNorms(s.view(mode, a), false, s.o.threads)
	if s.dist == nil {
		return norms, nil
	}
	for r, n := range norms {
		norms[r] = n * n
	}
	if err := s.dist.SumRows(mode, norms); err != nil {
		return nil, err
	}
	for r, n := range norms {
		norms[r] = math.Sqrt(n)
	}
	return norms, nil
}

func (s *cpState) mttkrp(n int, factors []*kernels.Matrix) error {
	start := time.Now()
	err := s.kern.MTTKRP(n, factors, s.mtt[n])
	s.kernelTime += time.Since(start)
	if err != nil {
		return fmt.Errorf("MTTKRP of mode %d: %w", n+1, err)
	}
	return nil
}

// run iterates until the fit settles or the iterations run out, or until
// the Context is done: it then sets s.stopped and returns nil.
func (s *cpState) run() error {
	o := s.o
	var prevFit float64
	for it := 1; it <= o.Iters; it++ {
		start := time.Now()
		s.kernelTime = 0
		if o.LineSearch && it >= 2 {
			s.prev = absorbed(s.prev, s.factors, s.lambda)
		}
		for n := range s.N {
			if s.dist == nil {
				if s.stopped = o.stopped(); s.stopped != nil {
					return nil
				}
			}
			if err := s.update(n, it); err != nil {
				if stop := o.stopped(); s.dist == nil && stop != nil && errors.Is(err, stop) {
					// Kernels on the same Context (EngineKernels) stop
					// inside the update, before the factor changes.
					s.stopped = stop
					return nil
				}
				return err
			}
		}
		fit, err := s.fitOf(s.mtt[s.N-1], s.factors[s.N-1], s.lambda, s.grams)
		if err != nil {
			return err
		}
		s.fit = fit
		extrapolated := false
		if o.LineSearch && it >= 2 {
			ok, err := s.lineSearch(it)
			if err != nil {
				return err
			}
			extrapolated = ok
		}
		elapsed := time.Since(start)
		st := IterStat{Iteration: it, Fit: s.fit, Delta: s.fit - prevFit, Seconds: elapsed.Seconds(),
			KernelSeconds: s.kernelTime.Seconds(), DenseSeconds: (elapsed - s.kernelTime).Seconds(), Extrapolated: extrapolated}
		s.res.History = append(s.res.History, st)
		s.res.Iterations = it
		if o.Progress != nil {
			o.Progress(st)
		}
		if o.Tol > 0 && it > 1 && math.Abs(st.Delta) < o.Tol {
			s.res.Converged = true
			break
		}
		prevFit = s.fit
	}
	return nil
}

// update runs the ALS step of mode n.
func (s *cpState) update(n, it int) error {
	if err := s.mttkrp(n, s.factors); err != nil {
		return err
	}
	v := hadamardExcept(s.grams, n)
	inv, pinv := symInverse(v, s.R)
	a, mtt := s.view(n, s.factors[n]), s.view(n, s.mtt[n])
	sumSq, maxAbs := mulSmall(a, mtt, inv, s.o.threads)
	if err := errors.Join(s.sumRows(n, sumSq), s.maxRows(n, maxAbs)); err != nil {
		return err
	}
	if !pinv && !finite(sumSq) {
		// Cholesky passed but the product overflowed float32: the
		// pseudo-inverse drops the directions that blew up.
		pinv = true
		sumSq, maxAbs = mulSmall(a, mtt, pseudoInverse(v, s.R), s.o.threads)
		if err := errors.Join(s.sumRows(n, sumSq), s.maxRows(n, maxAbs)); err != nil {
			return err
		}
	}
	if pinv {
		s.res.PseudoInverses++
	}
	if !finite(sumSq) {
		return fmt.Errorf("iteration %d: factor of mode %d is not finite (values beyond float32's range%s)", it, n+1, scaleHint(s.x))
	}
	if it > 1 {
		for r, x := range maxAbs {
			s.lambda[r] = 1
			if x >= 1 || (x > 0 && x < tinyColumn) {
				s.lambda[r] = x
			}
		}
	} else {
		for r, x := range sumSq {
			s.lambda[r] = math.Sqrt(x)
		}
	}
	s.grams[n] = scaleGram(a, s.lambda, s.o.threads)
	return s.sumRows(n, s.grams[n])
}

// scaleHint says, when x's largest value is far from 1, that its scale is
// what float32 could not hold: products and sums of values near 1e38
// overflow, and values near 1e-38 are subnormal, their inverses beyond
// range.
func scaleHint(x *formats.COO) string {
	var top float32
	for _, v := range x.Vals {
		top = max(top, v, -v)
	}
	if top > 0x1p-100 && top < 0x1p100 {
		return ""
	}
	return fmt.Sprintf(": the largest value is %.3g; values nearer 1, scaled by a constant, give the same factors", top)
}

// tinyColumn is the largest entry below which a factor's column is
// normalised after the first iteration, where max(1, max |entry|) leaves
// smaller columns as they are. Data of a tiny scale (values near 1e-25)
// leave a factor's columns at that scale, and the next mode's MTTKRP
// multiplies the data by it: 1e-50, below float32's range, so the fit
// fell to 0. Normalised, every factor stays near unit scale and λ holds
// the data's, as for data near 1.
const tinyColumn = 0x1p-20

// finite reports whether every x is neither NaN nor Inf.
func finite(xs []float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// fitOf returns 1 - ‖X - [[λ; A]]‖/‖X‖ from the MTTKRP m of the last mode
// (computed with the other factors as they are), that mode's factor a,
// λ and every mode's Gram matrix.
func (s *cpState) fitOf(m, a *kernels.Matrix, lambda []float64, grams [][]float64) (float64, error) {
	R := s.R
	m, a = s.view(s.N-1, m), s.view(s.N-1, a)
	var inner float64
	for i := range m.Rows {
		mr, ar := m.Row(i), a.Row(i)
		for r := range R {
			inner += lambda[r] * float64(mr[r]) * float64(ar[r])
		}
	}
	sum := []float64{inner}
	if err := s.sumRows(s.N-1, sum); err != nil {
		return 0, err
	}
	inner = sum[0]
	h := hadamardExcept(grams, -1)
	var normM2 float64
	for r := range R {
		for q := range R {
			normM2 += lambda[r] * lambda[q] * h[r*R+q]
		}
	}
	res2 := s.normX2 + normM2 - 2*inner
	if res2 < 0 || math.IsNaN(res2) {
		// Rounding can take a near-perfect fit's residual below zero.
		res2 = 0
	}
	return 1 - math.Sqrt(res2)/math.Sqrt(s.normX2), nil
}

// absorbed copies factors into dst (allocated if nil) with λ folded into
// the last mode, the form in which the line search extrapolates.
func absorbed(dst, factors []*kernels.Matrix, lambda []float64) []*kernels.Matrix {
	if dst == nil {
		dst = make([]*kernels.Matrix, len(factors))
		for m, f := range factors {
			dst[m] = kernels.NewMatrix(f.Rows, f.Cols)
		}
	}
	copyMatrices(dst, factors)
	last := dst[len(dst)-1]
	for i := range last.Rows {
		row := last.Row(i)
		for r := range row {
			row[r] *= float32(lambda[r])
		}
	}
	return dst
}

// lineSearch tries the extrapolated factors Y = P + s(C - P) and keeps
// them if their fit is not below the sweep's.
func (s *cpState) lineSearch(it int) (bool, error) {
	step := math.Cbrt(float64(it + 1))
	cur := absorbed(nil, s.factors, s.lambda)
	if s.trial == nil {
		s.trial = make([]*kernels.Matrix, s.N)
		for m, f := range s.factors {
			s.trial[m] = kernels.NewMatrix(f.Rows, f.Cols)
		}
	}
	ok := true
	for m := range s.N {
		p, c, y := s.view(m, s.prev[m]).Data, s.view(m, cur[m]).Data, s.view(m, s.trial[m]).Data
		for k := range y {
			y[k] = p[k] + float32(step)*(c[k]-p[k])
		}
		ok = ok && allFinite(s.view(m, s.trial[m]))
	}
	if ok, err := s.allOK(ok); !ok || err != nil {
		return false, err
	}
	grams := make([][]float64, s.N)
	for m := range s.N {
		grams[m] = gram(s.view(m, s.trial[m]), s.o.threads)
		if err := s.sumRows(m, grams[m]); err != nil {
			return false, err
		}
	}
	last := s.N - 1
	if err := s.mttkrp(last, s.trial); err != nil {
		return false, err
	}
	ones := make([]float64, s.R)
	for r := range ones {
		ones[r] = 1
	}
	fit, err := s.fitOf(s.mtt[last], s.trial[last], ones, grams)
	if err != nil {
		return false, err
	}
	if !(fit >= s.fit) {
		return false, nil
	}
	// Accept: unit 2-norm columns in every mode, the norms' product in λ.
	lambda := ones
	for m := range s.N {
		norms, err := s.colNorms(m, s.trial[m])
		if err != nil {
			return false, err
		}
		scaleColumns(s.view(m, s.trial[m]), norms, s.o.threads)
		for r := range lambda {
			lambda[r] *= norms[r]
		}
		s.grams[m] = gram(s.view(m, s.trial[m]), s.o.threads)
		if err := s.sumRows(m, s.grams[m]); err != nil {
			return false, err
		}
	}
	copyMatrices(s.factors, s.trial)
	s.lambda = lambda
	s.fit = fit
	return true, nil
}

// finishCP stores the final model in res: every column scaled to unit
// 2-norm with the norms folded into λ, components sorted by λ (largest
// first), and signs fixed so each column but the last mode's has its
// largest-magnitude entry positive (the last mode takes the sign product,
// so the model is unchanged). A zero column keeps λ = 0.
func finishCP(res *CPResult, factors []*kernels.Matrix, lambda []float64, threads int) {
	R := len(lambda)
	lambda = append([]float64(nil), lambda...)
	for _, a := range factors {
		norms := columnNorms(a, false, threads)
		scaleColumns(a, norms, threads)
		for r := range lambda {
			lambda[r] *= norms[r]
		}
	}
	N := len(factors)
	for m := range N - 1 {
		a := factors[m]
		for r := range R {
			var big float32
			for i := range a.Rows {
				if v := a.At(i, r); math.Abs(float64(v)) > math.Abs(float64(big)) {
					big = v
				}
			}
			if big < 0 {
				negateColumn(a, r)
				negateColumn(factors[N-1], r)
			}
		}
	}
	order := make([]int, R)
	for r := range order {
		order[r] = r
	}
	sort.SliceStable(order, func(a, b int) bool { return lambda[order[a]] > lambda[order[b]] })
	res.Lambda = make([]float64, R)
	for r, src := range order {
		res.Lambda[r] = lambda[src]
	}
	res.Factors = make([]*kernels.Matrix, N)
	for m, a := range factors {
		b := kernels.NewMatrix(a.Rows, a.Cols)
		for i := range a.Rows {
			src, dst := a.Row(i), b.Row(i)
			for r, o := range order {
				dst[r] = src[o]
			}
		}
		res.Factors[m] = b
	}
}

func negateColumn(a *kernels.Matrix, r int) {
	for i := range a.Rows {
		a.Data[i*a.Cols+r] = -a.Data[i*a.Cols+r]
	}
}

// errNoFactors is returned by writers given an empty result.
var errNoFactors = errors.New("result has no factors")
