package formats

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/sparsetune/sparsetune/internal/par"
)

// COO is a sparse tensor in coordinate format, stored as structure of arrays.
//
// Inds[m][k] is the 0-based mode-m index of nonzero k and Vals[k] its value.
// A COO may hold duplicate coordinates and explicit zeros; Dedup sums the
// duplicates. The zero value is not usable; build one with NewCOO.
type COO struct {
	Dims []int
	Inds [][]uint32
	Vals []float32
}

// NewCOO returns an empty tensor of the given dims with room for capacity
// nonzeros. It fails if CheckDims rejects dims.
func NewCOO(dims []int, capacity int) (*COO, error) {
	if err := CheckDims(dims); err != nil {
		return nil, err
	}
	if capacity < 0 || capacity > MaxNNZ {
		return nil, fmt.Errorf("capacity must be 0 to %d nonzeros, found %d", MaxNNZ, capacity)
	}
	t := &COO{Dims: slices.Clone(dims), Inds: make([][]uint32, len(dims))}
	for m := range t.Inds {
		t.Inds[m] = make([]uint32, 0, capacity)
	}
	t.Vals = make([]float32, 0, capacity)
	return t, nil
}

// Order returns the number of modes.
func (t *COO) Order() int { return len(t.Dims) }

// NNZ returns the number of stored nonzeros, duplicates included.
func (t *COO) NNZ() int { return len(t.Vals) }

// Density returns NNZ divided by the number of cells.
func (t *COO) Density() float64 { return float64(t.NNZ()) / Cells(t.Dims) }

// Append adds the nonzero v at the 0-based coordinate idx. It does not
// validate; call Validate once the tensor is built.
func (t *COO) Append(idx []uint32, v float32) {
	for m := range t.Inds {
		t.Inds[m] = append(t.Inds[m], idx[m])
	}
	t.Vals = append(t.Vals, v)
}

// Coord writes the coordinate of nonzero k into idx and returns it.
func (t *COO) Coord(k int, idx []uint32) []uint32 {
	idx = idx[:0]
	for m := range t.Inds {
		idx = append(idx, t.Inds[m][k])
	}
	return idx
}

// Clone returns a deep copy of t.
func (t *COO) Clone() *COO {
	c := &COO{Dims: slices.Clone(t.Dims), Inds: make([][]uint32, len(t.Inds)), Vals: slices.Clone(t.Vals)}
	for m := range t.Inds {
		c.Inds[m] = slices.Clone(t.Inds[m])
	}
	return c
}

// Validate checks the invariants of t: dims accepted by CheckDims, one index
// array per mode, every array of the same length (at most MaxNNZ), every
// index below its dim and every value finite. The error names the first
// offending nonzero (0-based) and mode (1-based).
func (t *COO) Validate() error {
	if err := checkFormatInput(t); err != nil {
		return err
	}
	// The values as checkFormatInput checks the indices (the engine
	// validates every input, a pass over all of it): a value is finite
	// unless its exponent bits are all set, so the largest exponent field
	// tells whether any is not, in parallel and without a branch per
	// value; only then is the first bad value looked for, and reported.
	if par.MaxMasked(valueBits(t.Vals), expMask) < expMask {
		return nil
	}
	k := slices.IndexFunc(t.Vals, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) })
	return fmt.Errorf("nonzero %d: value must be finite, found %v", k, t.Vals[k])
}

// checkArrays checks what every use of t's arrays relies on, without a
// pass over them: t is not nil, its dims are valid, and it has an index
// array per mode, each as long as the values.
func (t *COO) checkArrays() error {
	if t == nil {
		return errors.New("tensor is nil")
	}
	if err := CheckDims(t.Dims); err != nil {
		return err
	}
	if len(t.Inds) != len(t.Dims) {
		return fmt.Errorf("tensor has %d dims but %d index arrays", len(t.Dims), len(t.Inds))
	}
	n := len(t.Vals)
	if n > MaxNNZ {
		return fmt.Errorf("tensor has %d nonzeros, at most %d are supported", n, MaxNNZ)
	}
	for m, ind := range t.Inds {
		if len(ind) != n {
			return fmt.Errorf("mode %d has %d indices for %d values", m+1, len(ind), n)
		}
	}
	return nil
}

// expMask is a float32's exponent field: all set for infinities and NaNs.
const expMask = 0x7f800000

// valueBits views vals as their IEEE 754 bits, sharing their memory.
func valueBits(vals []float32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals))
}

// Equal reports whether t and u have the same dims and the same nonzeros in
// the same order, values compared bit for bit.
func (t *COO) Equal(u *COO) bool {
	if !slices.Equal(t.Dims, u.Dims) || len(t.Inds) != len(u.Inds) || len(t.Vals) != len(u.Vals) {
		return false
	}
	for m := range t.Inds {
		if !slices.Equal(t.Inds[m], u.Inds[m]) {
			return false
		}
	}
	for k := range t.Vals {
		if math.Float32bits(t.Vals[k]) != math.Float32bits(u.Vals[k]) {
			return false
		}
	}
	return true
}

var errBadPerm = errors.New("mode permutation must list every mode exactly once")

// checkModes reports whether modes are distinct 0-based modes of an order-n
// tensor; with all set it also requires every mode to appear.
func checkModes(modes []int, n int, all bool) error {
	if all && len(modes) != n {
		return errBadPerm
	}
	var seen [MaxOrder]bool
	for _, m := range modes {
		if err := CheckMode(m, n); err != nil {
			return err
		}
		if seen[m] {
			return fmt.Errorf("mode %d listed twice", m+1)
		}
		seen[m] = true
	}
	return nil
}

// Permute returns a tensor whose mode m is mode perm[m] of t. The index and
// value arrays are shared with t, not copied.
func (t *COO) Permute(perm []int) (*COO, error) {
	if err := checkModes(perm, t.Order(), true); err != nil {
		return nil, err
	}
	p := &COO{Dims: make([]int, len(perm)), Inds: make([][]uint32, len(perm)), Vals: t.Vals}
	for m, src := range perm {
		p.Dims[m] = t.Dims[src]
		p.Inds[m] = t.Inds[src]
	}
	return p, nil
}

// CheckMode returns an error unless mode is a 0-based mode of an
// order-order tensor, naming the mode as users count them, from 1.
func CheckMode(mode, order int) error {
	if mode < 0 || mode >= order {
		return fmt.Errorf("mode %s out of range 1 to %d", oneBased(mode), order)
	}
	return nil
}

// oneBased returns the 0-based mode or index m as users count it, from
// 1: m+1, without overflowing for the largest int.
func oneBased(m int) string {
	if m >= 0 {
		return strconv.FormatUint(uint64(m)+1, 10)
	}
	return strconv.Itoa(m + 1)
}
