package decomp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
	"github.com/sparsetune/sparsetune/internal/sysmem"
	"github.com/sparsetune/sparsetune/kernels"
)

// Defaults used where an Options field is left at its zero value.
const (
	// DefaultIters is the iteration limit when Options.Iters is 0.
	DefaultIters = 50
	// DefaultMTTKRPFormat is the MTTKRP format of every mode when
	// Options.Formats is empty: one ALTO copy of the tensor serves an MTTKRP
	// of every mode, so a decomposition converts the tensor once.
	DefaultMTTKRPFormat = "alto"
	// DefaultFiberFormat is the SpTTM format of the fiber matrices of
	// Tucker's TTM chain when Options.FiberFormat is empty.
	DefaultFiberFormat = "csr"
)

// Initialisations, the values of Options.Init.
const (
	InitRandom = "random" // seeded uniform [0,1) entries (orthonormalised for Tucker)
	InitHOSVD  = "hosvd"  // leading left singular vectors of each mode's unfolding, by randomised subspace iteration on its fiber matrix (docs/decomp.md)
)

// Options configures CPALS, TuckerHOOI and CPAPR. Zero values select the
// documented defaults, so Options{Rank: 8} is a complete CP-ALS request.
type Options struct {
	// Rank is the number of components of a CP model (CPALS, CPAPR).
	Rank int
	// Ranks are the Tucker core's dims, one per mode (TuckerHOOI).
	Ranks []int
	// Iters is the largest number of (outer) iterations; 0 means
	// DefaultIters.
	Iters int
	// Tol stops the iteration once |Δfit| (CP-ALS, Tucker) falls below it,
	// or, for CP-APR, once the KKT violation does. 0 runs all Iters.
	Tol float64
	// Seed seeds the random initialisation; equal seeds (and equal Threads)
	// give equal results.
	Seed uint64
	// Init is InitRandom or InitHOSVD; "" means InitRandom for the CP
	// methods and InitHOSVD for Tucker. CPAPR accepts only InitRandom.
	Init string
	// InitFactors, when set, replaces Init: one Dims[m] x rank matrix per
	// mode, used as given (copied) as the starting point, e.g. to resume a
	// decomposition from factors written by an earlier run.
	InitFactors []*kernels.Matrix
	// LineSearch turns on CP-ALS's extrapolation step (see CPALS).
	LineSearch bool
	// Threads is the number of goroutines of the kernels and of the dense
	// steps; 0 means GOMAXPROCS.
	Threads int
	// Formats names the MTTKRP format of each mode ("alto", "csf", "coo",
	// "hicoo"; see formats.NewTensorFormat) for the default CPU kernels.
	// Empty means DefaultMTTKRPFormat for every mode; one entry applies to
	// every mode.
	Formats []string
	// FiberFormat names the SpTTM format of the fiber matrices of Tucker's
	// TTM chain ("csr", "coo", "ell", "hyb"); "" means DefaultFiberFormat.
	FiberFormat string
	// MTTKRP, when set, supplies the MTTKRPs of CPALS instead of the
	// default CPU kernels (EngineKernels: through package engine).
	MTTKRP MTTKRPer
	// TTMChain, when set, supplies the TTM chains of TuckerHOOI. (The HOSVD
	// initialisation of any method builds its own fiber matrices; see
	// InitHOSVD.)
	TTMChain TTMChainer
	// Progress, when set, is called after every (outer) iteration.
	Progress func(IterStat)
	// Context, when set, stops the method once it is done: it is checked
	// before each mode's update. The method then returns the context's
	// error (context.Canceled for a Ctrl-C) beside the model so far, when
	// an iteration has completed (Result.Iterations), which a later run
	// can start from (InitFactors): CP-ALS's and CP-APR's as it stands,
	// every update being a model; Tucker's as its last iteration left it,
	// the core being made at an iteration's end. A distributed CP-ALS
	// does not check it: its parts stop together or not at all.
	Context context.Context
	// APR holds CP-APR's inner settings.
	APR APROptions
}

// APROptions are CP-APR's settings beyond Options; zero values select the
// defaults of Chi and Kolda (2012), also the Tensor Toolbox's.
type APROptions struct {
	// InnerIters is the largest number of multiplicative updates per mode
	// and outer iteration; 0 means 10.
	InnerIters int
	// Kappa is the offset added to factor entries stuck at zero while the
	// KKT conditions say they should grow ("inadmissible zeros"); 0 means
	// 0.01, negative turns the fix off.
	Kappa float64
	// KappaTol is how small an entry must be to count as stuck; 0 means
	// 1e-10.
	KappaTol float64
	// EpsDivZero bounds the model value a nonzero is divided by from below;
	// 0 means 1e-10.
	EpsDivZero float64
	// Format is the layout Φ is computed over, per mode: PhiCOO, PhiCSF,
	// PhiAuto, which times both on the first outer iteration and keeps the
	// faster per mode, or "": PhiCOO while nnz·R <= 2^24, else PhiCSF.
	Format string
	// Device, when set, computes every Φ on that accelerator instead of
	// the CPU forms (Format is then ignored): the nonzeros are uploaded
	// once per mode, sorted by it, and each inner update sends B and the
	// other factors in float32 and reads Φ back. The updates themselves
	// stay on the CPU, in float64. If the device fails mid-run, the run
	// goes on with the CPU's COO form and CPResult.Warnings says so.
	Device hetero.PhiDevice
}

// IterStat describes one (outer) iteration. Fit is set by CPALS and
// TuckerHOOI, LogLikelihood and KKTViolation by CPAPR.
type IterStat struct {
	Iteration     int     // 1-based
	Fit           float64 // 1 - ‖X - model‖/‖X‖
	LogLikelihood float64 // Σ x log m - Σ m over all cells (the log x! constant left out)
	KKTViolation  float64 // max over modes of max |min(A, 1 - Φ)|
	Delta         float64 // change of Fit (CP-ALS, Tucker) or of LogLikelihood (CP-APR) from the previous iteration
	Seconds       float64 // wall time of the iteration
	KernelSeconds float64 // time in the sparse kernels (MTTKRP, TTM chain, Φ)
	DenseSeconds  float64 // the rest: solves, Gram matrices, SVDs, normalisation, fit
	Extrapolated  bool    // CP-ALS: the line search's extrapolated factors were accepted
}

// resolved is Options after defaults and checks.
type resolved struct {
	Options
	threads int
}

// stopped returns the error of a done Context, else nil.
func (o Options) stopped() error {
	if o.Context == nil {
		return nil
	}
	return o.Context.Err()
}

func (o Options) resolve() resolved {
	r := resolved{Options: o, threads: o.Threads}
	if r.Iters == 0 {
		r.Iters = DefaultIters
	}
	if r.threads <= 0 {
		r.threads = runtime.GOMAXPROCS(0)
	}
	return r
}

// checkTensor rejects what no decomposition here can run on, with one line
// saying why.
// checkPart checks one rank's block of a distributed tensor: what
// checkTensor checks, except that it may hold no nonzeros, or only zeros.
func checkPart(x *formats.COO) error {
	if x == nil {
		return errors.New("tensor is nil")
	}
	if x.Order() < 3 {
		return fmt.Errorf("tensor has order %d: decompositions need order 3 or more", x.Order())
	}
	return x.Validate()
}

// checkTensor checks a tensor every method can decompose and returns its
// ‖X‖² (normSq), which CP-ALS and Tucker measure their fit against: made
// once here, since with duplicate coordinates it costs a sort.
func checkTensor(x *formats.COO) (float64, error) {
	if x == nil {
		return 0, errors.New("tensor is nil")
	}
	if x.Order() < 3 {
		return 0, fmt.Errorf("tensor has order %d: decompositions need order 3 or more", x.Order())
	}
	if len(x.Inds) != x.Order() {
		return 0, fmt.Errorf("tensor has %d index arrays for order %d", len(x.Inds), x.Order())
	}
	if x.NNZ() == 0 {
		return 0, errors.New("tensor is empty (no nonzeros)")
	}
	if err := x.Validate(); err != nil {
		return 0, err
	}
	for k, v := range x.Vals {
		// Validate already refuses these; the check here keeps the message
		// about values in decomp's own words whatever Validate says.
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, fmt.Errorf("nonzero %d has value %v: values must be finite", k, v)
		}
	}
	norm := normSq(x)
	if norm == 0 {
		return 0, errors.New("tensor has only zero values")
	}
	return norm, nil
}

// checkCommon checks the options every method shares.
func checkCommon(o Options) error {
	if o.Iters < 0 {
		return fmt.Errorf("iterations must be >= 0 (0 = %d), found %d", DefaultIters, o.Iters)
	}
	if o.Tol < 0 || math.IsNaN(o.Tol) {
		return fmt.Errorf("tolerance must be >= 0, found %v", o.Tol)
	}
	if o.Threads < 0 {
		return fmt.Errorf("threads must be >= 0 (0 = all cores), found %d", o.Threads)
	}
	switch o.Init {
	case "", InitRandom, InitHOSVD:
	default:
		return fmt.Errorf("init must be %q or %q, found %q", InitRandom, InitHOSVD, o.Init)
	}
	return nil
}

// checkInitFactors checks user-given starting factors against the tensor
// and rank (ranks[m] columns for mode m).
func checkInitFactors(x *formats.COO, fs []*kernels.Matrix, ranks []int) error {
	if len(fs) != x.Order() {
		return fmt.Errorf("initial factors: %d matrices for a tensor of order %d", len(fs), x.Order())
	}
	for m, f := range fs {
		if f == nil || f.Rows != x.Dims[m] || f.Cols != ranks[m] || len(f.Data) != f.Rows*f.Cols {
			got := "nil"
			if f != nil {
				got = fmt.Sprintf("%dx%d", f.Rows, f.Cols)
				if len(f.Data) != f.Rows*f.Cols {
					got += fmt.Sprintf(" with %d values", len(f.Data))
				}
			}
			return fmt.Errorf("initial factor of mode %d is %s, expected %dx%d", m+1, got, x.Dims[m], ranks[m])
		}
		for _, v := range f.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("initial factor of mode %d holds %v: values must be finite", m+1, v)
			}
		}
	}
	return nil
}

// normSq returns ‖X‖² in float64: the sum of the squared values of the
// tensor x holds, whose duplicate coordinates (formats.COO allows them)
// are summed, as every kernel sums them. Squaring each of two duplicates
// instead would give the fit of another tensor.
func normSq(x *formats.COO) float64 {
	if x.Duplicates() > 0 {
		y := x.Clone()
		y.Sort()
		var s float64
		for start, n := 0, y.NNZ(); start < n; {
			v, k := float64(y.Vals[start]), start+1
			for ; k < n && sameCoord(y, start, k); k++ {
				v += float64(y.Vals[k])
			}
			s += v * v
			start = k
		}
		return s
	}
	var s float64
	for _, v := range x.Vals {
		s += float64(v) * float64(v)
	}
	return s
}

// sameCoord reports whether nonzeros a and b of x have one coordinate.
func sameCoord(x *formats.COO, a, b int) bool {
	for _, ind := range x.Inds {
		if ind[a] != ind[b] {
			return false
		}
	}
	return true
}

// checkDense refuses a decomposition whose dense matrices would not fit in
// memory, before any is allocated (kernels.CheckDenseFits): cols[m] float32
// columns of Dims[m] rows per mode, all the copies of a mode's matrices
// the method keeps counted together, and besides them work float64 values
// of the small matrices (Gram matrices, a core, a solver's), which what
// names ("" when there are none). Go ends a process whose allocation
// fails: at a rank of 10^5, CP-ALS's first R x R Gram matrix (80 GB)
// ended it with a runtime trace.
func checkDense(x *formats.COO, method, what string, cols []int, work sysmem.Size) error {
	shapes := make([][2]int, x.Order(), x.Order()+1)
	for m, d := range x.Dims {
		shapes[m] = [2]int{d, cols[m]}
	}
	if work > 0 {
		// As float32 pairs: a float64 takes two float32s' bytes.
		shapes = append(shapes, [2]int{int(min(uint64(work), uint64(math.MaxInt))), 2})
	}
	need := method + ": the factor matrices and their work copies"
	if what != "" {
		need = method + ": the factor matrices, their work copies and " + what
	}
	return kernels.CheckDenseFits(x, need, shapes...)
}

// satMul returns a·b for a, b >= 0, or math.MaxInt where it would overflow.
func satMul(a, b int) int {
	if hi, lo := bits.Mul64(uint64(a), uint64(b)); hi != 0 || lo > math.MaxInt {
		return math.MaxInt
	}
	return a * b
}

// squares returns the values of k n x n matrices, saturating.
func squares(k, n int) sysmem.Size {
	var s sysmem.Size
	s.AddMatrix(k, satMul(n, n), 1)
	return s
}
