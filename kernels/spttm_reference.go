package kernels

import (
	"fmt"

	"github.com/sparsetune/sparsetune/formats"
)

// SpTTMReference computes the SpTTM Y = F·Uᵀ of a fiber matrix by the
// definition, one entry at a time, accumulating in float64; it is the
// yardstick the tests hold every SpTTM format to.
//
// The factor is passed transposed, as Ut = Uᵀ, a Dims[Mode] x R row-major
// matrix, like the MTTKRP factors: the kernels read one length-R row of it
// per entry, and that row is contiguous. It returns Y as a row-major
// Rows() x R slice: row r is the output fiber at F's row r.
func SpTTMReference(f *formats.FiberMatrix, ut *Matrix) ([]float64, error) {
	if ut == nil {
		return nil, fmt.Errorf("spttm reference: factor is nil")
	}
	R := ut.Cols
	if err := ut.check(f.Cols(), R); err != nil {
		return nil, fmt.Errorf("spttm reference: factor: %w", err)
	}
	y := make([]float64, f.Rows()*R)
	for r := range f.Rows() {
		row := y[r*R : (r+1)*R]
		for e := f.RowPtr[r]; e < f.RowPtr[r+1]; e++ {
			v, u := float64(f.Vals[e]), ut.Row(int(f.ColInd[e]))
			for j := range row {
				row[j] += v * float64(u[j])
			}
		}
	}
	return y, nil
}
