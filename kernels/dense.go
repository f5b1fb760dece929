package kernels

import "fmt"

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
