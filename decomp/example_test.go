package decomp_test

import (
	"fmt"

	"github.com/sparsetune/sparsetune/decomp"
	"github.com/sparsetune/sparsetune/formats"
)

// A rank-1 tensor, a ⊗ b ⊗ c with a = (1, 2), b = (1, 1, 1), c = (3, 1),
// stored sparsely (every cell is nonzero here), decomposed at rank 1.
func ExampleCPALS() {
	x, _ := formats.NewCOO([]int{2, 3, 2}, 12)
	a, b, c := []float32{1, 2}, []float32{1, 1, 1}, []float32{3, 1}
	for i := range a {
		for j := range b {
			for k := range c {
				x.Append([]uint32{uint32(i), uint32(j), uint32(k)}, a[i]*b[j]*c[k])
			}
		}
	}
	res, err := decomp.CPALS(x, decomp.Options{Rank: 1, Iters: 20, Tol: 1e-6, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	// λ = ‖a‖·‖b‖·‖c‖ = √5·√3·√10.
	fmt.Printf("fit %.4f, lambda %.4f, mode-1 factor (%.4f, %.4f)\n",
		res.Fit, res.Lambda[0], res.Factors[0].At(0, 0), res.Factors[0].At(1, 0))
	// Output: fit 1.0000, lambda 12.2474, mode-1 factor (0.4472, 0.8944)
}
