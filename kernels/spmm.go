package kernels

import "fmt"

// SpMM sets out (rows × R, row-major) to A·U, where A is a sparse matrix of
// len(ptr)-1 rows in CSR arrays (row i's entries are vals[ptr[i]:ptr[i+1]]
// in columns col[ptr[i]:ptr[i+1]]) and U is dense with R columns,
// row-major. It runs on the calling goroutine.
//
// It is SpTTM's CSR inner loop offered for small products, such as the
// layers of the format predictor's network (a few 32 × 32 matrices): there
// a general dense GEMM spends more on blocking and dispatch than on the
// product, and skipping A's zeros (ReLU outputs, a graph's missing edges)
// saves work a dense product cannot. It panics if the arrays do not match.
func SpMM(out []float32, ptr, col []uint32, vals, U []float32, R int) {
	rows := len(ptr) - 1
	if rows < 0 || R < 1 || len(out) < rows*R || len(vals) < len(col) {
		panic(fmt.Sprintf("kernels: SpMM of %d rows, rank %d, into %d outputs with %d values for %d columns", rows, R, len(out), len(vals), len(col)))
	}
	k := len(U) / R
	// The largest column, without a branch per entry: the check is a
	// pass over the entries, as long as the product's own on the
	// predictor's small matrices.
	var most uint32
	for _, c := range col {
		most = max(most, c)
	}
	if len(col) > 0 && uint64(most) >= uint64(k) {
		panic(fmt.Sprintf("kernels: SpMM column %d beyond the %d rows of U", most, k))
	}
	for i := range rows {
		if ptr[i] > ptr[i+1] || int(ptr[i+1]) > len(col) {
			panic(fmt.Sprintf("kernels: SpMM row %d pointers %d..%d outside %d entries", i, ptr[i], ptr[i+1], len(col)))
		}
	}
	groups := R / 8
	if groups > 0 {
		csrRows8(out, ptr, col, vals, U, R, 0, 0, groups)
	}
	if r0 := 8 * groups; r0 < R {
		// The last R mod 8 columns, row by row.
		for i := range rows {
			d := out[i*R+r0 : (i+1)*R]
			clear(d)
			for e := ptr[i]; e < ptr[i+1]; e++ {
				v, u := vals[e], U[int(col[e])*R+r0:int(col[e]+1)*R]
				u = u[:len(d)]
				for r := range d {
					d[r] += v * u[r]
				}
			}
		}
	}
}
