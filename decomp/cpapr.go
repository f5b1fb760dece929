package decomp

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/kernels"
)

// CP-APR defaults (Chi and Kolda 2012, and the Tensor Toolbox's cp_apr).
const (
	defaultAPRInner    = 10
	defaultAPRKappa    = 0.01
	defaultAPRKappaTol = 1e-10
	defaultAPREps      = 1e-10
	// piCacheMax is the most nonzeros·R products CPAPR keeps between
	// inner iterations (2^24 float64s, 128 MiB); above it the products of
	// the other modes' factor rows are recomputed in every inner iteration.
	piCacheMax = 1 << 24
)

// CPAPR computes a rank-R non-negative CP model of a tensor of counts by
// alternating Poisson regression with multiplicative updates (CP-APR MU,
// Chi and Kolda, "On tensors, sparsity, and nonnegative factorizations",
// SIAM J. Matrix Anal. Appl. 33(4), 2012). It maximises the Poisson
// log-likelihood Σ x log m - Σ m of the data x under the model m, not a
// least-squares fit, so it suits counts with many small values.
//
// Each outer iteration updates the modes in turn. For mode n, with
// B = A_n diag(λ) and Π the Khatri-Rao product of the other factors (one
// row per nonzero, never formed beyond the nonzeros),
//
//	Φ = (X_(n) ⊘ max(B Πᵀ, ε)) Π,  B ← B ∗ Φ
//
// is repeated up to APR.InnerIters times, stopping early once the KKT
// violation of the subproblem, max |min(B, 1 - Φ)|, is below Tol; then the
// columns of B are scaled to sum 1 into λ. Entries of A_n that are zero
// while Φ > 1 says they should grow are first moved off zero by APR.Kappa
// (the "inadmissible zeros" fix). The run stops when every mode's first
// check passes (Tol > 0), or after Iters outer iterations.
//
// Φ is computed over one of two layouts per mode, made once (APR.Format):
// a copy of the nonzeros sorted by the mode (PhiCOO), with the products of
// the other modes' factor rows cached per nonzero between inner iterations
// while nnz·R <= 2^24, or a CSF tree rooted at the mode (PhiCSF), which
// forms those products once per fiber of each level instead. Either way
// goroutines own disjoint rows of Φ. By default the first while the cache
// fits and the second beyond; with PhiAuto the first outer iteration
// times one inner iteration of each, and each mode keeps the faster for
// the rest of the run (CPResult.PhiFormats). Everything is in
// float64, except on an accelerator (APR.Device), which computes Φ over
// COO in float32.
//
// Reported per outer iteration: the log-likelihood Σ x log m - Σ_r λ_r
// (the factors' columns sum to 1, so Σ m over all cells is Σ λ; the
// constant -Σ log x! is left out, and m is bounded below by ε inside the
// log) and the KKT violation, max over modes of max |min(A_n, 1 - Φ)|.
//
// Values must be non-negative; the random initialisation (Init "random",
// or InitFactors, which must be non-negative too) starts from uniform
// factors scaled to column sums 1 and λ_r = Σ x / R, so the model's total
// matches the data's from the start. The result's factors have columns
// summing to 1 and Lambda the component totals, largest first.
func CPAPR(x *formats.COO, opts Options) (*CPResult, error) {
	if _, err := checkTensor(x); err != nil {
		return nil, err
	}
	if err := checkCommon(opts); err != nil {
		return nil, err
	}
	var top float32
	for k, v := range x.Vals {
		if v < 0 {
			return nil, fmt.Errorf("the nonzero at %s has value %v: CP-APR models counts and needs values >= 0", oneBased(x, k), v)
		}
		top = max(top, v)
	}
	if opts.Rank < 1 {
		return nil, fmt.Errorf("rank must be >= 1, found %d", opts.Rank)
	}
	if opts.Init == InitHOSVD {
		return nil, errors.New("cp-apr: init must be random (singular vectors are not non-negative)")
	}
	a := opts.APR
	if err := checkPhiFormat(a.Format); err != nil {
		return nil, err
	}
	// NaN fails every comparison, so each test says what is allowed.
	if !(a.InnerIters >= 0 && a.KappaTol >= 0 && a.EpsDivZero >= 0) || math.IsNaN(a.Kappa) || math.IsInf(a.Kappa, 0) || math.IsInf(a.KappaTol, 0) || math.IsInf(a.EpsDivZero, 0) {
		return nil, fmt.Errorf("cp-apr: inner iterations, kappa tolerance and epsilon must be >= 0 and kappa a number (negative turns its fix off), all finite; found %d, %v, %v, %v", a.InnerIters, a.KappaTol, a.EpsDivZero, a.Kappa)
	}
	if a.InnerIters == 0 {
		a.InnerIters = defaultAPRInner
	}
	if a.Kappa == 0 {
		a.Kappa = defaultAPRKappa
	}
	if a.KappaTol == 0 {
		a.KappaTol = defaultAPRKappaTol
	}
	if a.EpsDivZero == 0 {
		a.EpsDivZero = defaultAPREps
	}
	o := opts.resolve()
	o.APR = a
	N, R := x.Order(), o.Rank
	ranks := make([]int, N)
	for m := range ranks {
		ranks[m] = R
	}
	// Per mode: the float32 start, the float64 factor and Φ (two float32
	// columns each per rank).
	cols := make([]int, N)
	for m := range cols {
		cols[m] = 5 * R
	}
	if err := checkDense(x, "CP-APR", "", cols, 0); err != nil {
		return nil, err
	}
	init, err := initCP(x, o, ranks)
	if err != nil {
		return nil, err
	}
	for m, f := range init {
		for _, v := range f.Data {
			if v < 0 {
				return nil, fmt.Errorf("initial factor of mode %d has the negative entry %v: CP-APR needs non-negative factors", m+1, v)
			}
		}
	}

	res := &CPResult{}
	s := &aprState{x: x, o: o, N: N, R: R}
	if top < 1 && o.Tol > 0 {
		// The stopping test weighs each mode's factor by λ, the
		// components' totals, as the Tensor Toolbox's cp_apr does: data
		// far below one count pass it at once, however far the factors
		// are from the KKT conditions reported (on the unweighted ones).
		s.warnings = append(s.warnings, fmt.Sprintf("the largest value is %.3g: CP-APR models counts, and on values below 1 its stopping test (the factors weighted by the components' totals) may pass before the KKT violation reported is below --tol; scale the values to counts", top))
	}
	start := time.Now()
	if err := s.setup(init); err != nil {
		return nil, err
	}
	res.SetupSeconds = time.Since(start).Seconds()
	var prevLL float64
	var stopped error // the Context's, when it ends the run early
	for it := 1; it <= o.Iters; it++ {
		start := time.Now()
		s.kernelTime = 0
		converged := true
		var kkt float64
		for n := range N {
			if stopped = o.stopped(); stopped != nil {
				break
			}
			ok, v := s.updateMode(n, it)
			converged = converged && ok
			kkt = max(kkt, v)
		}
		if stopped != nil {
			break
		}
		t0 := time.Now()
		ll := s.logLikelihood()
		s.kernelTime += time.Since(t0)
		elapsed := time.Since(start)
		delta := ll - prevLL
		if it == 1 {
			delta = 0
		}
		st := IterStat{Iteration: it, LogLikelihood: ll, KKTViolation: kkt, Delta: delta, Seconds: elapsed.Seconds(),
			KernelSeconds: s.kernelTime.Seconds(), DenseSeconds: (elapsed - s.kernelTime).Seconds()}
		res.History = append(res.History, st)
		res.Iterations = it
		res.LogLikelihood, res.KKTViolation = ll, kkt
		if o.Progress != nil {
			o.Progress(st)
		}
		if o.Tol > 0 && converged {
			res.Converged = true
			break
		}
		prevLL = ll
	}
	if stopped != nil && res.Iterations == 0 {
		return nil, stopped
	}
	s.finish(res)
	return res, stopped
}

// aprState is a CP-APR run in progress. Factors are I x R row-major
// float64.
type aprState struct {
	x      *formats.COO
	o      resolved
	N, R   int
	a      [][]float64    // factors, columns summing to 1
	lambda []float64      // component totals
	phi    [][]float64    // last Φ of each mode
	sorted []*formats.COO // per mode: the nonzeros sorted by that mode (PhiCOO), or nil
	splits [][]int        // per mode: parts+1 nonzero offsets at row starts
	csf    []*csfPhi      // per mode: the CSF tree rooted at it (PhiCSF), or nil
	form   []string       // per mode: the Φ form in use, "" while timing both (PhiAuto)
	timing []phiTiming    // per mode: what PhiAuto measured
	pi     []float64      // nnz x R cache of Π rows, nil when too large or unused
	piOK   bool           // pi holds the Π rows of the mode being updated
	b      []float64      // scratch: B of the mode being updated

	kernelTime time.Duration

	// On an accelerator (APROptions.Device): a job per mode, the factors,
	// B and Φ in float32 for it to read and write.
	dev      hetero.PhiDevice
	jobs     []hetero.Job
	fac32    []*kernels.Matrix
	b32      []*kernels.Matrix
	phi32    []*kernels.Matrix
	warnings []string
}

// phiTiming is one mode's measurement for PhiAuto: the Π cache's fill and
// one COO Φ, and one CSF Φ (0 until measured).
type phiTiming struct{ fill, coo, csf time.Duration }

func (s *aprState) setup(init []*kernels.Matrix) error {
	N, R := s.N, s.R
	parts := resolvedThreads(s.o.Threads)
	s.a = make([][]float64, N)
	s.phi = make([][]float64, N)
	s.sorted = make([]*formats.COO, N)
	s.splits = make([][]int, N)
	s.csf = make([]*csfPhi, N)
	s.form = make([]string, N)
	s.timing = make([]phiTiming, N)
	s.lambda = make([]float64, R)
	for r := range s.lambda {
		s.lambda[r] = 1
	}
	if s.o.APR.Format == "" {
		s.o.APR.Format = defaultPhiFormat(s.x.NNZ(), R)
	}
	if s.o.APR.Device != nil {
		s.o.APR.Format = PhiCOO // the layout the device's jobs are bound over, and the CPU's should it fail
	}
	conv := formats.NewConverter(s.x) // the CSFs of every mode share its fiber counts
	for m := range N {
		s.a[m] = make([]float64, len(init[m].Data))
		for k, v := range init[m].Data {
			s.a[m][k] = float64(v)
		}
		sums := colSums(s.a[m], R)
		for r, c := range sums {
			s.lambda[r] *= c
		}
		normaliseCols(s.a[m], sums)
		s.phi[m] = make([]float64, len(s.a[m]))
		if f := s.o.APR.Format; f == PhiCOO || f == PhiAuto {
			tf, err := formats.NewTensorFormat(s.x, "coo", m)
			if err != nil {
				return fmt.Errorf("sort the nonzeros by mode %d: %w", m+1, err)
			}
			s.sorted[m] = tf.(*formats.COO)
			s.splits[m] = rowSplits(s.sorted[m].Inds[m], parts)
		}
		if f := s.o.APR.Format; f == PhiCSF || f == PhiAuto {
			c, err := newCSFPhi(conv, m, parts)
			if err != nil {
				return err
			}
			s.csf[m] = c
		}
		if s.o.APR.Format != PhiAuto {
			s.form[m] = s.o.APR.Format
		}
	}
	if s.o.InitFactors == nil {
		// Spread the data's total evenly over the components, so the first
		// updates start from the right scale.
		var total float64
		for _, v := range s.x.Vals {
			total += float64(v)
		}
		for r := range s.lambda {
			s.lambda[r] = total / float64(R)
		}
	}
	if s.o.APR.Device != nil {
		if err := s.bindDevice(s.o.APR.Device); err != nil {
			return err
		}
	}
	if nnz := s.x.NNZ(); nnz*R <= piCacheMax && s.sorted[0] != nil && s.dev == nil {
		s.pi = make([]float64, nnz*R)
	}
	return nil
}

// bindDevice binds a Φ job per mode on dev, over the nonzeros sorted by
// the mode, which init made (a device forces the COO form) and keeps on
// the host, for the CPU to take over.
func (s *aprState) bindDevice(dev hetero.PhiDevice) error {
	N, R := s.N, s.R
	s.dev = dev
	s.fac32 = make([]*kernels.Matrix, N)
	for m := range N {
		s.fac32[m] = kernels.NewMatrix(s.x.Dims[m], R)
	}
	s.b32, s.phi32, s.jobs = make([]*kernels.Matrix, N), make([]*kernels.Matrix, N), make([]hetero.Job, N)
	for m := range N {
		s.b32[m], s.phi32[m] = kernels.NewMatrix(s.x.Dims[m], R), kernels.NewMatrix(s.x.Dims[m], R)
		job, err := dev.Phi(s.sorted[m], m, s.fac32, s.b32[m], float32(s.o.APR.EpsDivZero), s.phi32[m])
		if err != nil {
			s.closeJobs()
			s.dev = nil
			return fmt.Errorf("cp-apr on %s: %w", dev.Info().Name, err)
		}
		s.jobs[m] = job
		s.form[m] = "coo@" + dev.Info().Name
	}
	return nil
}

// closeJobs frees the device's jobs.
func (s *aprState) closeJobs() {
	for m, j := range s.jobs {
		if j != nil {
			if err := j.Close(); err != nil {
				s.warnings = append(s.warnings, fmt.Sprintf("%s: freeing mode %d's Φ: %v", s.dev.Info().Name, m+1, err))
			}
			s.jobs[m] = nil
		}
	}
}

// phiOnDevice runs mode n's Φ job: the factors of the other modes and b
// go down in float32, Φ comes back. On an error the device is dropped and
// every mode goes on with the CPU's COO form, which has its layouts.
func (s *aprState) phiOnDevice(n int, b, phi []float64) bool {
	for k, v := range b {
		s.b32[n].Data[k] = float32(v)
	}
	if _, err := s.jobs[n].Run(); err != nil {
		s.warnings = append(s.warnings, fmt.Sprintf("%s failed computing Φ (%v): the CPU computes it from here on", s.dev.Info().Name, err))
		s.closeJobs()
		s.dev = nil
		for m := range s.form {
			s.form[m] = PhiCOO
		}
		return false
	}
	for k, v := range s.phi32[n].Data {
		phi[k] = float64(v)
	}
	return true
}

// rowSplits cuts the nonzeros (sorted by the output index inds) into
// parts ranges of about equal size, each cut moved forward to a change of
// index, so no output row is shared between ranges.
func rowSplits(inds []uint32, parts int) []int {
	nnz := len(inds)
	splits := make([]int, parts+1)
	for t := 1; t < parts; t++ {
		k := max(nnz*t/parts, splits[t-1])
		for k > 0 && k < nnz && inds[k] == inds[k-1] {
			k++
		}
		splits[t] = k
	}
	splits[parts] = nnz
	return splits
}

func colSums(a []float64, R int) []float64 {
	s := make([]float64, R)
	for k, v := range a {
		s[k%R] += v
	}
	return s
}

// normaliseCols divides each column by its sum; a zero sum leaves the
// (zero) column as it is.
func normaliseCols(a, sums []float64) {
	R := len(sums)
	for k := range a {
		if c := sums[k%R]; c != 0 {
			a[k] /= c
		}
	}
}

// updateMode runs the inner iterations of mode n. It reports whether the
// first KKT check already passed (the mode had converged) and the mode's
// KKT violation after the update.
func (s *aprState) updateMode(n, it int) (bool, float64) {
	o := s.o.APR
	R := s.R
	a := s.a[n]
	if it > 1 && o.Kappa > 0 {
		for k, v := range a {
			if v < o.KappaTol && s.phi[n][k] > 1 {
				a[k] += o.Kappa
			}
		}
	}
	if len(s.b) < len(a) {
		s.b = make([]float64, len(a))
	}
	b := s.b[:len(a)]
	for k, v := range a {
		b[k] = v * s.lambda[k%R]
	}
	phi := s.phi[n]
	s.piOK = false
	if s.dev != nil {
		// The device reads every other mode's factor as it is now.
		for m, f := range s.fac32 {
			if m != n {
				for k, v := range s.a[m] {
					f.Data[k] = float32(v)
				}
			}
		}
	}
	converged := false
	for i := range o.InnerIters {
		s.phiOf(n, i, b, phi)
		var viol float64
		for k, v := range b {
			viol = max(viol, math.Abs(math.Min(v, 1-phi[k])))
		}
		if viol < s.o.Tol {
			converged = i == 0
			break
		}
		for k := range b {
			b[k] *= phi[k]
		}
	}
	s.choose(n)
	sums := colSums(b, R)
	copy(a, b)
	normaliseCols(a, sums)
	copy(s.lambda, sums)
	var kkt float64
	for k, v := range a {
		kkt = max(kkt, math.Abs(math.Min(v, 1-phi[k])))
	}
	return converged, kkt
}

// phiOf computes Φ of mode n in its form, for inner iteration i. While
// the mode's form is open (PhiAuto), inner iteration 0 runs the COO form
// and 1 the CSF form, each timed.
func (s *aprState) phiOf(n, i int, b, phi []float64) {
	if s.dev != nil {
		start := time.Now()
		ok := s.phiOnDevice(n, b, phi)
		s.kernelTime += time.Since(start)
		if ok {
			return
		}
	}
	form := s.form[n]
	if form == "" {
		switch {
		case s.timing[n].coo == 0:
			form = PhiCOO
		case s.timing[n].csf == 0:
			form = PhiCSF
		default:
			form = PhiCOO
		}
	}
	start := time.Now()
	var fill time.Duration
	if form == PhiCSF {
		s.csf[n].compute(s.a, b, phi, s.R, s.o.APR.EpsDivZero)
	} else {
		if s.pi != nil && !s.piOK {
			s.fillPi(n)
			s.piOK = true
			fill = time.Since(start)
		}
		s.computePhi(n, b, phi)
	}
	took := time.Since(start)
	s.kernelTime += took
	if s.form[n] == "" {
		t := &s.timing[n]
		if form == PhiCOO && t.coo == 0 {
			t.fill, t.coo = fill, max(took-fill, 1)
		} else if form == PhiCSF && t.csf == 0 {
			t.csf = max(took, 1)
		}
	}
}

// choose settles mode n's Φ form once both were timed: the COO form costs
// the Π cache's fill plus a Φ per inner iteration, the CSF form a Φ per
// inner iteration. The other form's layout is dropped.
func (s *aprState) choose(n int) {
	t := s.timing[n]
	if s.form[n] != "" || t.coo == 0 || t.csf == 0 {
		return
	}
	inner := time.Duration(s.o.APR.InnerIters)
	if t.fill+inner*t.coo <= inner*t.csf {
		s.form[n], s.csf[n] = PhiCOO, nil
		return
	}
	s.form[n], s.sorted[n], s.splits[n] = PhiCSF, nil, nil
	if !slices.Contains(s.form, "") && !slices.Contains(s.form, PhiCOO) {
		s.pi = nil // no mode computes over the sorted copies any more
	}
}

// fillPi caches, for every nonzero of mode n's sorted copy, the product
// of the other modes' factor rows.
func (s *aprState) fillPi(n int) {
	x, R := s.sorted[n], s.R
	sp := s.splits[n]
	par.Range(len(sp)-1, len(sp)-1, func(t, _, _ int) {
		for k := sp[t]; k < sp[t+1]; k++ {
			s.piRow(x, n, k, s.pi[k*R:k*R+R])
		}
	})
}

// piRow writes Π_{m≠n} A_m(i_m, :) of nonzero k of x into dst.
func (s *aprState) piRow(x *formats.COO, n, k int, dst []float64) {
	R := s.R
	first := true
	for m := range s.N {
		if m == n {
			continue
		}
		row := s.a[m][int(x.Inds[m][k])*R : int(x.Inds[m][k])*R+R]
		row = row[:len(dst)]
		if first {
			copy(dst, row)
			first = false
			continue
		}
		for r, v := range row {
			dst[r] *= v
		}
	}
}

// computePhi sets phi = (X_(n) ⊘ max(B Πᵀ, ε)) Π: for each nonzero x at
// i, with π its row of Π, phi(i_n, :) += x / max(⟨B(i_n, :), π⟩, ε) · π.
// Goroutines own disjoint row ranges of the sorted copy.
func (s *aprState) computePhi(n int, b, phi []float64) {
	x, R := s.sorted[n], s.R
	eps := s.o.APR.EpsDivZero
	clear(phi)
	sp := s.splits[n]
	par.Range(len(sp)-1, len(sp)-1, func(t, _, _ int) {
		var scratch []float64
		if s.pi == nil {
			scratch = make([]float64, R)
		}
		inds := x.Inds[n]
		for k := sp[t]; k < sp[t+1]; k++ {
			var pi []float64
			if s.pi != nil {
				pi = s.pi[k*R : k*R+R]
			} else {
				pi = scratch
				s.piRow(x, n, k, pi)
			}
			i := int(inds[k])
			br := b[i*R : i*R+R]
			br = br[:len(pi)]
			var m float64
			for r, v := range pi {
				m += br[r] * v
			}
			w := float64(x.Vals[k]) / math.Max(m, eps)
			pr := phi[i*R : i*R+R]
			pr = pr[:len(pi)]
			for r, v := range pi {
				pr[r] += w * v
			}
		}
	})
}

// logLikelihood returns Σ x log max(m, ε) - Σ λ over the nonzeros, each
// range summed separately and the sums added in range order.
func (s *aprState) logLikelihood() float64 {
	x, R := s.x, s.R
	eps := s.o.APR.EpsDivZero
	parts := resolvedThreads(s.o.Threads)
	sums := make([]float64, parts)
	par.Range(x.NNZ(), parts, func(t, lo, hi int) {
		p := make([]float64, R)
		var ll float64
		for k := lo; k < hi; k++ {
			for r := range p {
				p[r] = s.lambda[r]
			}
			for m := range s.N {
				row := s.a[m][int(x.Inds[m][k])*R : int(x.Inds[m][k])*R+R]
				for r, v := range row {
					p[r] *= v
				}
			}
			var mk float64
			for _, v := range p {
				mk += v
			}
			if v := float64(x.Vals[k]); v != 0 {
				ll += v * math.Log(math.Max(mk, eps))
			}
		}
		sums[t] = ll
	})
	var ll float64
	for _, v := range sums {
		ll += v
	}
	for _, l := range s.lambda {
		ll -= l
	}
	return ll
}

// finish stores the model, components sorted by λ (largest first).
func (s *aprState) finish(res *CPResult) {
	R := s.R
	order := make([]int, R)
	for r := range order {
		order[r] = r
	}
	sort.SliceStable(order, func(a, b int) bool { return s.lambda[order[a]] > s.lambda[order[b]] })
	res.Lambda = make([]float64, R)
	for r, src := range order {
		res.Lambda[r] = s.lambda[src]
	}
	if s.dev != nil {
		s.closeJobs()
	}
	res.Warnings = s.warnings
	res.PhiFormats = make([]string, s.N)
	for m, f := range s.form {
		if f == "" {
			f = PhiCOO // never timed against CSF: a run that converged at once
		}
		res.PhiFormats[m] = f
	}
	res.Factors = make([]*kernels.Matrix, s.N)
	for m, a := range s.a {
		f := kernels.NewMatrix(s.x.Dims[m], R)
		for i := range f.Rows {
			for r, src := range order {
				f.Data[i*R+r] = float32(a[i*R+src])
			}
		}
		res.Factors[m] = f
	}
}

// oneBased returns the coordinates of x's nonzero k, 1-based as a FROSTT
// file writes them, "(10, 3, 9)": its position among the nonzeros names
// no line of the file, which may hold comments or summed duplicates.
func oneBased(x *formats.COO, k int) string {
	parts := make([]string, len(x.Inds))
	for m, ind := range x.Inds {
		parts[m] = strconv.FormatUint(uint64(ind[k])+1, 10)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
