package features

import (
	"fmt"
	"math"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/hetero"
)

// Revision numbers what the features mean, so that a model trained on
// one meaning is not fed another (a model file records the revision it
// was trained on; package model refuses an MTTKRP model of an older one).
//
//  1. The first features, until 2026-11-26.
//  2. MTTKRP's fiber features describe the leaf runs of the CSF rooted at
//     the mode (the fibers of the last mode of formats.RootedOrder), not
//     the mode's own fibers. SpTTM's are unchanged.
const Revision = 2

// Feature indexes a global feature in a Vector.
type Feature int

// The global features, in vector order. Counts and sizes that span orders
// of magnitude are log10 of the value (of 1+value where it can be 0);
// fractions are in [0, 1]. Ranges says what each can take.
//
// Slices are the mode's slices (one per index of the mode) and fibers the
// fibers the op's kernels walk in their innermost loop (one per
// combination of the other modes' indices): for SpTTM the mode's own, for
// MTTKRP those of the last mode of formats.RootedOrder(order, mode), the
// runs of the sorted COO's innermost loop and the CSF's leaf runs unless
// formats.CSFOrder moves another mode of far fewer fibers to the CSF's
// leaf (since 2026-11-28; the features kept their meaning, revision 2).
// Both count only non-empty ones, and per-slice and per-fiber statistics
// are over those. Rows are
// what the op's formats store as rows: the fibers of the mode for SpTTM
// (the rows of the fiber matrix), its slices for MTTKRP (the rows of the
// output). Empty rows refer to the mapping matrix of package graphenc:
// the fraction of its row mode's indices with no nonzero.
const (
	Order           Feature = iota // tensor order N
	LogNNZ                         // log10 nonzeros
	LogDensity                     // log10 nonzeros / product of dims
	LogMaxDim                      // log10 largest dim
	LogMinDim                      // log10 smallest dim
	LogMeanDim                     // log10 arithmetic mean of the dims
	LogModeDim                     // log10 dim of the mode
	LogSlices                      // log10 non-empty slices of the mode
	LogFibers                      // log10 non-empty fibers the op's innermost loops walk
	LogSliceNNZMean                // log10 mean nonzeros per slice
	LogSliceNNZStd                 // log10(1 + standard deviation of nonzeros per slice)
	LogSliceNNZMax                 // log10 most nonzeros in a slice
	LogSliceNNZCV                  // log10(1 + coefficient of variation of nonzeros per slice)
	LogFiberNNZMean                // the same four statistics per fiber
	LogFiberNNZStd
	LogFiberNNZMax
	LogFiberNNZCV
	EmptySlices    // fraction of the mode's indices with no nonzero
	EmptyRows      // fraction of the mapping matrix's rows with no nonzero
	ELLPadMean     // padding fraction of an ELL of the rows at the mean row length, rounded (at least 1); longer rows cut
	ELLPadMax      // padding fraction of an ELL of the rows at the longest row's length
	LogELLSlots    // log10 ELL slots per nonzero at the longest row's length
	HYBCOOFraction // fraction of nonzeros outside the ELL part of a HYB at formats.HYBWidthOfHistogram's width

	Count int = iota // number of features
)

// Names are the features' names, in vector order, as the CLI and model
// metadata spell them.
var Names = [Count]string{
	"order", "log_nnz", "log_density", "log_max_dim", "log_min_dim", "log_mean_dim", "log_mode_dim",
	"log_slices", "log_fibers",
	"log_slice_nnz_mean", "log_slice_nnz_std", "log_slice_nnz_max", "log_slice_nnz_cv",
	"log_fiber_nnz_mean", "log_fiber_nnz_std", "log_fiber_nnz_max", "log_fiber_nnz_cv",
	"empty_slices", "empty_rows", "ell_pad_mean", "ell_pad_max", "log_ell_slots", "hyb_coo_fraction",
}

func (f Feature) String() string {
	if f < 0 || int(f) >= Count {
		return fmt.Sprintf("Feature(%d)", int(f))
	}
	return Names[f]
}

// Ranges are the closed intervals the features lie in for any tensor
// sparsetune reads: dims below 2^32, nonzeros below 2^32, order at most
// formats.MaxOrder. Upper ends of log features follow from those limits.
var Ranges = [Count][2]float64{
	Order:           {2, formats.MaxOrder},
	LogNNZ:          {0, 32 * math.Log10(2)},
	LogDensity:      {-32 * math.Log10(2) * formats.MaxOrder, 0},
	LogMaxDim:       {0, 32 * math.Log10(2)},
	LogMinDim:       {0, 32 * math.Log10(2)},
	LogMeanDim:      {0, 32 * math.Log10(2)},
	LogModeDim:      {0, 32 * math.Log10(2)},
	LogSlices:       {0, 32 * math.Log10(2)},
	LogFibers:       {0, 32 * math.Log10(2)},
	LogSliceNNZMean: {0, 32 * math.Log10(2)},
	LogSliceNNZStd:  {0, 32 * math.Log10(2)},
	LogSliceNNZMax:  {0, 32 * math.Log10(2)},
	LogSliceNNZCV:   {0, 16 * math.Log10(2)}, // cv <= sqrt(count - 1) < 2^16
	LogFiberNNZMean: {0, 32 * math.Log10(2)},
	LogFiberNNZStd:  {0, 32 * math.Log10(2)},
	LogFiberNNZMax:  {0, 32 * math.Log10(2)},
	LogFiberNNZCV:   {0, 16 * math.Log10(2)},
	EmptySlices:     {0, 1},
	EmptyRows:       {0, 1},
	ELLPadMean:      {0, 1},
	ELLPadMax:       {0, 1},
	LogELLSlots:     {0, 32 * math.Log10(2)},
	HYBCOOFraction:  {0, 1},
}

// Vector is the global features of one tensor, op and mode.
type Vector [Count]float64

// Global returns the global features of x for op along mode (0-based):
// Summarize(x).Global(op, mode). Callers that need several modes or ops of
// one tensor should keep the Summary.
func Global(x *formats.COO, op hetero.Op, mode int) (Vector, error) {
	if mode < 0 || mode >= x.Order() {
		return Vector{}, fmt.Errorf("global features: mode %d out of range for an order-%d tensor", mode+1, x.Order())
	}
	s, err := Summarize(x)
	if err != nil {
		return Vector{}, fmt.Errorf("global features: %w", err)
	}
	return s.Global(op, mode)
}

// log10 is math.Log10 with log10 of 0 (an empty tensor's counts) taken as 0.
func log10(x float64) float64 {
	if x <= 1 {
		return 0
	}
	return math.Log10(x)
}

// mix is a 64-bit finaliser (the murmur3 one): every input bit affects
// every output bit, so any of its bits are fair: the fiber table's probe
// start and the sample's positions use the high ones.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Describe returns the features as name-value pairs in vector order.
func (v *Vector) Describe() []NamedValue {
	out := make([]NamedValue, Count)
	for i := range Count {
		out[i] = NamedValue{Name: Names[i], Value: v[i]}
	}
	return out
}

// NamedValue is one feature with its name.
type NamedValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}
