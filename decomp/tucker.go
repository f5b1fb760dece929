package decomp

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/npy"
	"github.com/sparsetune/sparsetune/internal/par"
	"github.com/sparsetune/sparsetune/internal/sysmem"
	"github.com/sparsetune/sparsetune/kernels"
)

// TuckerResult is a Tucker model X ≈ G ×_1 U_1 ×_2 U_2 … ×_N U_N.
type TuckerResult struct {
	// Factors holds one Dims[m] x Ranks[m] float32 matrix per mode with
	// orthonormal columns, each column's largest-magnitude entry positive.
	Factors []*kernels.Matrix
	// Core is G, Ranks[0] x … x Ranks[N-1] in C order (the last mode
	// varying fastest), in float64.
	Core  []float64
	Ranks []int
	// Fit is 1 - ‖X - model‖/‖X‖ = 1 - sqrt(‖X‖² - ‖G‖²)/‖X‖.
	Fit        float64
	Iterations int
	Converged  bool
	History    []IterStat
	// SetupSeconds is the time spent building fiber matrices and SpTTM
	// plans before the first iteration (0 for supplied kernels).
	SetupSeconds float64
}

// TuckerHOOI computes a Tucker decomposition of x with core dims
// opts.Ranks by higher-order orthogonal iteration (De Lathauwer, De Moor
// and Vandewalle 2000; Kolda and Bader 2009).
//
// Each iteration updates the modes in turn: Y = X ×_{m≠n} U_mᵀ, the TTM
// chain of mode n matricised (Dims[n] x Π_{m≠n} R_m), and U_n becomes its
// R_n leading left singular vectors. After the last mode the core is
// G = U_Nᵀ Y and, the factors being orthonormal, ‖X - model‖² =
// ‖X‖² - ‖G‖², so the fit costs nothing beyond G. The run stops when
// |Δfit| < Tol (Tol > 0) or after Iters iterations.
//
// Leading left singular vectors of Y (I x P): when Y has at most 2^16
// entries, gonum's thin SVD of Y itself; above, the eigenvectors of the
// smaller Gram matrix (YᵀY when P <= I, then U = orth(Y V) by Gram-Schmidt;
// Y Yᵀ otherwise), which needs I·P² flops but no I x P workspace beyond Y.
//
// The TTM chains come from opts.TTMChain or from a CPU (see CPU: one
// SpTTM on a fiber matrix, the other products dense), built once per mode
// before the first iteration. Init defaults to InitHOSVD here; random
// factors are orthonormalised, and so are opts.InitFactors.
func TuckerHOOI(x *formats.COO, opts Options) (*TuckerResult, error) {
	normX2, err := checkTensor(x)
	if err != nil {
		return nil, err
	}
	if err := checkCommon(opts); err != nil {
		return nil, err
	}
	N := x.Order()
	if len(opts.Ranks) != N {
		return nil, fmt.Errorf("tucker needs %d ranks (one per mode), found %d", N, len(opts.Ranks))
	}
	ranks := append([]int(nil), opts.Ranks...)
	P := make([]int, N) // columns of mode n's TTM chain
	for n, r := range ranks {
		if r < 1 {
			return nil, fmt.Errorf("rank of mode %d must be >= 1, found %d", n+1, r)
		}
		if r > x.Dims[n] {
			return nil, fmt.Errorf("rank %d of mode %d exceeds its dim %d", r, n+1, x.Dims[n])
		}
	}
	for n := range ranks {
		P[n] = 1
		for m, r := range ranks {
			if m != n {
				P[n] = satMul(P[n], r)
			}
		}
		if ranks[n] > P[n] {
			return nil, fmt.Errorf("rank %d of mode %d exceeds %d, the product of the other ranks: the core could not have it", ranks[n], n+1, P[n])
		}
	}
	if opts.Init == "" {
		opts.Init = InitHOSVD
	}
	o := opts.resolve()
	// Per mode: the factor (Dims[n] x R_n) and the TTM chain's result
	// (Dims[n] x the product of the other ranks).
	perMode := make([]int, N)
	for n := range perMode {
		perMode[n] = ranks[n] + min(P[n], math.MaxInt-ranks[n])
	}
	// The small matrices: the core (float64), and for one mode at a time
	// the Gram matrix of its TTM chain's smaller side, one per thread
	// while summed, with the eigensolver's copies, or, where the chain is
	// wider than tall, its float64 copy.
	coreLen := 1
	for _, r := range ranks {
		coreLen = satMul(coreLen, r)
	}
	var work sysmem.Size
	for n, d := range x.Dims {
		w := squares(o.threads+4, min(d, P[n]))
		if P[n] > d {
			w.AddMatrix(d, P[n], 1)
		}
		work = max(work, w)
	}
	work.Add(coreLen, 1)
	if err := checkDense(x, "Tucker", "the core and the SVDs' Gram matrices", perMode, work); err != nil {
		return nil, err
	}

	res := &TuckerResult{Ranks: ranks}
	kern := o.TTMChain
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
	if o.InitFactors != nil || o.Init == InitRandom {
		for _, f := range factors {
			orthonormalise(f)
		}
	}
	if p, ok := kern.(ttmPreparer); ok {
		start := time.Now()
		if err := p.prepareTTMChain(x, ranks); err != nil {
			return nil, err
		}
		res.SetupSeconds = time.Since(start).Seconds()
	}

	ys := make([]*kernels.Matrix, N)
	for n := range N {
		ys[n] = kernels.NewMatrix(x.Dims[n], P[n])
	}
	last := N - 1
	var core []float64
	var fit, prevFit float64
	var stopped error // the Context's, when it ends the run early
	for it := 1; it <= o.Iters; it++ {
		start := time.Now()
		var kernelTime time.Duration
		// The factors as the last iteration left them, which its core
		// fits: each mode's update replaces its matrix, so a copy of the
		// slice keeps them.
		before := slices.Clone(factors)
		for n := range N {
			if stopped = o.stopped(); stopped != nil {
				break
			}
			t0 := time.Now()
			if err := kern.TTMChain(n, factors, ys[n]); err != nil {
				if stopped = o.stopped(); stopped != nil && errors.Is(err, stopped) {
					// Kernels on the same Context stop inside the chain.
					break
				}
				return nil, fmt.Errorf("TTM chain of mode %d: %w", n+1, err)
			}
			kernelTime += time.Since(t0)
			u, err := leadingLeftSingular(ys[n], ranks[n], o.threads)
			if err != nil {
				return nil, fmt.Errorf("iteration %d, mode %d: %w", it, n+1, err)
			}
			factors[n] = u
		}
		if stopped != nil {
			factors = before
			break
		}
		// G = U_lastᵀ Y_last, R_last x P_last; ‖G‖² gives the fit.
		core = coreOf(factors[last], ys[last], o.threads)
		var normG2 float64
		for _, g := range core {
			normG2 += g * g
		}
		res2 := normX2 - normG2
		if res2 < 0 || math.IsNaN(res2) {
			res2 = 0 // rounding, at a perfect fit
		}
		fit = 1 - math.Sqrt(res2)/math.Sqrt(normX2)
		elapsed := time.Since(start)
		st := IterStat{Iteration: it, Fit: fit, Delta: fit - prevFit, Seconds: elapsed.Seconds(),
			KernelSeconds: kernelTime.Seconds(), DenseSeconds: (elapsed - kernelTime).Seconds()}
		res.History = append(res.History, st)
		res.Iterations = it
		if o.Progress != nil {
			o.Progress(st)
		}
		if o.Tol > 0 && it > 1 && math.Abs(st.Delta) < o.Tol {
			res.Converged = true
			break
		}
		prevFit = fit
	}
	if stopped != nil && res.Iterations == 0 {
		return nil, stopped
	}
	res.Fit = fit
	res.Factors = factors
	// G is R_last x (modes 0..N-2 in C order); the core in C order puts
	// the last mode fastest, so it is Gᵀ.
	rl := ranks[last]
	cols := len(core) / rl
	res.Core = make([]float64, len(core))
	for r := range rl {
		for c := range cols {
			res.Core[c*rl+r] = core[r*cols+c]
		}
	}
	return res, stopped
}

// coreOf returns uᵀy (u is I x R, y is I x P) as R x P row-major float64,
// summing row ranges in parallel and adding them in range order.
func coreOf(u, y *kernels.Matrix, threads int) []float64 {
	R, P := u.Cols, y.Cols
	parts := rangeParts(u.Rows, float64(R*P), threads)
	partial := make([][]float64, parts)
	par.Range(u.Rows, parts, func(t, lo, hi int) {
		g := make([]float64, R*P)
		for i := lo; i < hi; i++ {
			yr := y.Row(i)
			for r, ur := range u.Row(i) {
				if ur == 0 {
					continue
				}
				gr := g[r*P : r*P+P]
				gr = gr[:len(yr)]
				for c, v := range yr {
					gr[c] += float64(ur) * float64(v)
				}
			}
		}
		partial[t] = g
	})
	g := make([]float64, R*P)
	for _, p := range partial {
		for k, v := range p {
			g[k] += v
		}
	}
	return g
}

// svdDirectMax is the largest I·P for which leadingLeftSingular takes the
// SVD of Y itself. gonum's SVD runs on one core and costs several times
// the Gram route's I·P²/2 multiply-adds (which run on every core): on
// splatt_med at ranks 8,8,8 (Y up to 29567 x 64) the SVDs took 0.4 s per
// iteration. Small Y keep the SVD, whose accuracy does not depend on the
// gap between the R-th and the next singular value.
const svdDirectMax = 1 << 16

// leadingLeftSingular returns the R leading left singular vectors of y
// (I x P, R <= min(I, P)) as an I x R matrix with orthonormal columns.
func leadingLeftSingular(y *kernels.Matrix, R, threads int) (*kernels.Matrix, error) {
	I, P := y.Rows, y.Cols
	out := kernels.NewMatrix(I, R)
	switch {
	case I*P <= svdDirectMax:
		d := mat.NewDense(I, P, nil)
		for i := range I {
			row := d.RawRowView(i)
			for j, v := range y.Row(i) {
				row[j] = float64(v)
			}
		}
		var svd mat.SVD
		if !svd.Factorize(d, mat.SVDThinU) {
			return nil, fmt.Errorf("SVD of the %dx%d TTM chain failed", I, P)
		}
		var u mat.Dense
		svd.UTo(&u) // singular values are in decreasing order
		for i := range I {
			row := out.Row(i)
			for r := range R {
				row[r] = float32(u.At(i, r))
			}
		}
	case P <= I:
		// Right singular vectors from YᵀY, then U = orth(Y V): the span of
		// Y V is that of the leading left singular vectors.
		v, err := topEigenvectors(gram(y, threads), P, R)
		if err != nil {
			return nil, err
		}
		_, _ = mulSmall(out, y, v, threads)
		orthonormalise(out)
	default:
		d := mat.NewDense(I, P, nil)
		for i := range I {
			row := d.RawRowView(i)
			for j, v := range y.Row(i) {
				row[j] = float64(v)
			}
		}
		var c mat.SymDense
		c.SymOuterK(1, d)
		g := make([]float64, I*I)
		for i := range I {
			for j := range I {
				g[i*I+j] = c.At(i, j)
			}
		}
		v, err := topEigenvectors(g, I, R)
		if err != nil {
			return nil, err
		}
		for i := range I {
			row := out.Row(i)
			for r := range R {
				row[r] = float32(v[i*R+r])
			}
		}
	}
	fixSigns(out)
	return out, nil
}

// topEigenvectors returns the eigenvectors of the k largest eigenvalues of
// the symmetric n x n matrix g, as n x k row-major.
func topEigenvectors(g []float64, n, k int) ([]float64, error) {
	sym := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, g[i*n+j])
		}
	}
	var eig mat.EigenSym
	if !eig.Factorize(sym, true) {
		return nil, fmt.Errorf("eigen decomposition of a %dx%d Gram matrix failed", n, n)
	}
	vals := eig.Values(nil)
	var vec mat.Dense
	eig.VectorsTo(&vec)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return vals[order[a]] > vals[order[b]] })
	out := make([]float64, n*k)
	for i := range n {
		for c := range k {
			out[i*k+c] = vec.At(i, order[c])
		}
	}
	return out, nil
}

// WriteNPY writes the model as NumPy .npy files of float32 in C order:
// PREFIX.mode1.npy … (Dims[m] x Ranks[m]) and PREFIX.core.npy (shape
// Ranks), each through a temporary file renamed over its path. It returns
// the paths.
func (r *TuckerResult) WriteNPY(prefix string) ([]string, error) {
	if len(r.Factors) == 0 {
		return nil, errNoFactors
	}
	paths, err := writeFactors(prefix, r.Factors)
	if err != nil {
		return paths, err
	}
	core := make([]float32, len(r.Core))
	for i, g := range r.Core {
		core[i] = float32(g)
	}
	path := prefix + ".core.npy"
	if err := npy.WriteFile(path, r.Ranks, core); err != nil {
		return paths, fmt.Errorf("write %s: %w", path, err)
	}
	return append(paths, path), nil
}
