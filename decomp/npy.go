package decomp

import (
	"fmt"

	"github.com/sparsetune/sparsetune/internal/npy"
	"github.com/sparsetune/sparsetune/kernels"
)

// WriteNPY writes the model as NumPy .npy files of float32 in C order:
// PREFIX.mode1.npy … PREFIX.modeN.npy, the factors (Dims[m] x R), and
// PREFIX.lambda.npy, the weights (R). Each file goes to a temporary file
// renamed over its path, so none is ever partial. It returns the paths.
func (r *CPResult) WriteNPY(prefix string) ([]string, error) {
	if len(r.Factors) == 0 {
		return nil, errNoFactors
	}
	paths, err := writeFactors(prefix, r.Factors)
	if err != nil {
		return paths, err
	}
	lambda := make([]float32, len(r.Lambda))
	for i, l := range r.Lambda {
		lambda[i] = float32(l)
	}
	path := prefix + ".lambda.npy"
	if err := npy.WriteFile(path, []int{len(lambda)}, lambda); err != nil {
		return paths, fmt.Errorf("write %s: %w", path, err)
	}
	return append(paths, path), nil
}

// writeFactors writes PREFIX.modeM.npy for every factor.
func writeFactors(prefix string, fs []*kernels.Matrix) ([]string, error) {
	var paths []string
	for m, f := range fs {
		path := fmt.Sprintf("%s.mode%d.npy", prefix, m+1)
		if err := npy.WriteFile(path, []int{f.Rows, f.Cols}, f.Data); err != nil {
			return paths, fmt.Errorf("write %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
