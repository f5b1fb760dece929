//go:build !(goexperiment.simd && amd64)

package kernels

// InnerLoops says which inner loops the build uses (sparsetune bench
// prints it): this build has the scalar ones.
func InnerLoops() string { return "scalar (build with GOEXPERIMENT=simd for AVX2)" }

func csrRows8(out []float32, ptr []uint32, col []uint32, vals []float32, U []float32, R, a, r0, groups int) {
	csrRows8Scalar(out, ptr, col, vals, U, R, a, r0, groups)
}

func cooRows8(out []float32, rows, col []uint32, vals []float32, U []float32, R, r0, groups int, add bool) {
	cooRows8Scalar(out, rows, col, vals, U, R, r0, groups, add)
}

func ellSlots8(out []float32, col []uint32, vals []float32, U []float32, R, lo, r0, groups int) {
	ellSlots8Scalar(out, col, vals, U, R, lo, r0, groups)
}

func mttkrpRuns8(dst []float32, rowBase, R, r0, groups int, o *mttkrpOperands) {
	mttkrpRuns8Scalar(dst, rowBase, R, r0, groups, o)
}

// csf3Vector is the vectorised order-3 CSF loop; without GOEXPERIMENT=simd
// there is none and csfBlock's generic loop runs.
func csf3Vector(out []float32, roots, ptr0, idx1, ptr1, idx2 []uint32, vals, A1, A2 []float32, R, r0, groups int) bool {
	return false
}
