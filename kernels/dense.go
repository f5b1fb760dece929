package kernels

import (
	"fmt"
	"strings"

	"github.com/sparsetune/sparsetune/formats"
	"github.com/sparsetune/sparsetune/internal/sysmem"
)

// Matrix is a dense row-major float32 matrix: element (i, j) is
// Data[i*Cols+j] and len(Data) is Rows*Cols. Kernels take factor matrices
// and write outputs as Matrix values; row-major keeps a length-R row of a
// factor (what a nonzero reads) contiguous.
type Matrix struct {
	Rows, Cols int
	Data       []float32
}

// NewMatrix returns a zeroed rows x cols matrix.
func NewMatrix(rows, cols int) *Matrix {
	return &Matrix{Rows: rows, Cols: cols, Data: make([]float32, rows*cols)}
}

// CheckDenseFits returns nil when float32 matrices of the given shapes
// ({rows, cols} each), allocated together for an operation on x, fit in
// memory: no more than the machine has available, and countable by an
// int. Otherwise the error names what, how much it needs and how much
// there is, and the modes of x that use few of their indices, which
// x.Compact would shrink; it is sysmem.ErrTooLarge (errors.Is).
//
// Go cannot recover from a failed allocation (the runtime ends the
// process), so an operation that sizes dense matrices by a tensor's dims
// calls this first: a mode of 2^31 indices makes a rank-16 factor of 128
// GiB whatever the nonzeros.
func CheckDenseFits(x *formats.COO, what string, shapes ...[2]int) error {
	var need sysmem.Size
	for _, s := range shapes {
		need.AddMatrix(s[0], s[1], 4)
	}
	err := need.Fits()
	if err == nil {
		return nil
	}
	if x != nil {
		if hint := sparseModes(x); hint != "" {
			return fmt.Errorf("%s need %w; %s", what, err, hint)
		}
	}
	return fmt.Errorf("%s need %w", what, err)
}

// sparseModes describes the modes of x whose used indices are fewer than a
// tenth of their dim.
func sparseModes(x *formats.COO) string {
	var modes, used, dims []string
	for m, d := range x.Dims {
		if u := x.UsedIndices(m); u < d/10 {
			modes = append(modes, fmt.Sprint(m+1))
			used = append(used, fmt.Sprint(u))
			dims = append(dims, fmt.Sprint(d))
		}
	}
	switch len(modes) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("mode %s uses only %s of its %s indices (%s)", modes[0], used[0], dims[0], renumber)
	}
	return fmt.Sprintf("modes %s use only %s of their %s indices (%s)",
		strings.Join(modes, ", "), strings.Join(used, ", "), strings.Join(dims, ", "), renumber)
}

const renumber = "sparsetune convert IN OUT --compact renumbers them, as formats.COO.Compact does"

// Row returns row i as a slice of length and capacity Cols that aliases
// Data.
func (a *Matrix) Row(i int) []float32 {
	return a.Data[i*a.Cols : (i+1)*a.Cols : (i+1)*a.Cols]
}

// At returns element (i, j).
func (a *Matrix) At(i, j int) float32 { return a.Data[i*a.Cols+j] }

// check reports whether a is a usable rows x cols matrix. It allocates
// only when it fails, so kernels can call it on every run.
func (a *Matrix) check(rows, cols int) error {
	if a == nil {
		return fmt.Errorf("matrix is nil, expected %dx%d", rows, cols)
	}
	if a.Rows != rows || a.Cols != cols {
		return fmt.Errorf("matrix is %dx%d, expected %dx%d", a.Rows, a.Cols, rows, cols)
	}
	if len(a.Data) != rows*cols {
		return fmt.Errorf("matrix is %dx%d but holds %d values, expected %d", rows, cols, len(a.Data), rows*cols)
	}
	return nil
}
