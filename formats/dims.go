package formats

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

const (
	// MinOrder and MaxOrder bound the order of a tensor.
	MinOrder = 2
	MaxOrder = 8
	// MaxDim is the largest dimension: indices are uint32, and a dim
	// must fit an int (on 32-bit platforms, 2^31-1).
	MaxDim = min(1<<32, math.MaxInt)
	// MaxIndexBits is the widest linear index (sum over modes of
	// ceil(log2 dim)) that sparsetune addresses.
	MaxIndexBits = 128
	// MaxNNZ is the largest number of nonzeros of one tensor: positions
	// are uint32, and a count must fit an int (on 32-bit platforms,
	// 2^31-1).
	MaxNNZ = min(math.MaxUint32, math.MaxInt)
)

// ModeBits returns the number of bits needed to store an index below dim,
// ceil(log2 dim), and 0 for dim <= 1.
func ModeBits(dim int) int {
	if dim <= 1 {
		return 0
	}
	return bits.Len64(uint64(dim - 1))
}

// CheckDims reports whether dims describe a tensor sparsetune can hold:
// order in [MinOrder, MaxOrder], every dim in [1, MaxDim], and index bits
// totalling at most MaxIndexBits.
func CheckDims(dims []int) error {
	if len(dims) < MinOrder || len(dims) > MaxOrder {
		return fmt.Errorf("order must be %d to %d, found %d", MinOrder, MaxOrder, len(dims))
	}
	total := 0
	for m, d := range dims {
		if d < 1 || d > MaxDim {
			return fmt.Errorf("dim of mode %d must be 1 to %d, found %d", m+1, MaxDim, d)
		}
		total += ModeBits(d)
	}
	if total > MaxIndexBits {
		return fmt.Errorf("product of dims %s overflows: needs %d index bits, at most %d are addressable",
			FormatDims(dims), total, MaxIndexBits)
	}
	return nil
}

// FormatDims writes dims as "I1xI2x...".
func FormatDims(dims []int) string {
	var b strings.Builder
	for m, d := range dims {
		if m > 0 {
			b.WriteByte('x')
		}
		b.WriteString(strconv.Itoa(d))
	}
	return b.String()
}

// Cells returns the product of dims as a float64; it never overflows.
func Cells(dims []int) float64 {
	p := 1.0
	for _, d := range dims {
		p *= float64(d)
	}
	return p
}
