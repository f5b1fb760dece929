//go:build !amd64 || purego

package kernels

import "github.com/sparsetune/sparsetune/formats"

// Without amd64 assembly (other architectures, or the purego tag) there
// are no vector loops: every function below reports false and the
// portable Go runs.

const cpuVec = vecScalar

const usePEXT = false

func csrRowsVec(out []float32, ptr, col []uint32, vals, U []float32, R, a, r0, w int) bool {
	return false
}

func cooRunsVec(out []float32, rows, col []uint32, vals, U []float32, R, r0, w int, add bool) bool {
	return false
}

func ellSlotsVec(out []float32, col []uint32, vals, U []float32, R, lo, r0, w int) bool {
	return false
}

func mttkrpRunsVec(dst []float32, rowBase, R, r0, w int, o *mttkrpOperands) bool {
	return false
}

func csfVector(out []float32, x *formats.CSF, f0, f1 int, fac *[formats.MaxOrder][]float32, R, r0, groups int) bool {
	return false
}

func altoVec(dst []float32, c *altoChunk, order, rowBase, R, r0, w int, scatter bool) bool {
	return false
}

func hicooScatterVec(dst []float32, x *formats.HiCOO, blk0, blk1 int, modes []int, facs [][]float32, rowBase, R, r0, w int) bool {
	return false
}

func addVec(dst, src []float32) int { return 0 }

func pextVec(dst []uint32, lin []uint64, mask uint64, base uint32) bool { return false }

func matMulVec(c, a, b []float32, m, k, n int) int { return 0 }

func elementwiseVec(op elementwiseOp, dst, x, y []float32) int { return 0 }
