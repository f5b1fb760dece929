// Package dist runs CP-ALS over the ranks of an MPI job (package mpi),
// for tensors past one machine.
//
// The tensor is partitioned as in SPLATT's medium-grained decomposition:
// the P ranks form a p_1 × … × p_N grid (Grid), each mode's indices are
// cut into p_n contiguous layers holding about equal nonzeros (Partition),
// and the rank at grid cell (c_1, …, c_N) owns the nonzeros whose mode-n
// index lies in layer c_n of every mode. Whatever share of the nonzeros a
// rank read is first sent to its owner (one Alltoallv).
//
// Each rank holds, of every factor, only the rows of its own layers: the
// rows its block's nonzeros read and write. An MTTKRP of mode n runs on
// the rank's block with decomp's CPU kernels (ALTO by default) and gives
// partial rows of the rank's mode-n layer; they are summed among the
// ranks sharing the layer (an Allreduce of |layer|·R floats), after
// which every rank of the layer holds the same rows and computes the
// same updated factor rows: no row is sent anywhere else. What CP-ALS
// needs over all rows (column norms, Gram matrices, the fit's inner
// product: R or R² numbers) is summed along the grid's mode-n fiber, one
// rank per layer (decomp.Distributed). The whole factors are gathered
// once, at the end.
//
// So per mode and iteration a rank sends |layer_n|·R floats plus O(R²),
// against SPLATT's exchange of the partial and updated rows it shares;
// the dense steps of decomp.CPALS run unchanged on the rows at hand. The
// same seed gives the same factors on every rank, and the fit of a
// single-process run up to the order of float32 sums. Report counts the
// bytes and time spent communicating.
package dist
