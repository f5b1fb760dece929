// Package kernels holds sparsetune's CPU kernels: SpTTM on the mode-n fiber
// matrix in the formats COO, CSR, ELL and HYB, MTTKRP on a tensor in COO,
// CSF, HiCOO and ALTO, and a naive reference of each operation that the
// tests hold every format to. MatMul is a dense product of small matrices
// on the same vector units (the format predictor's network). It
// also embeds the accelerator kernel sources (kernels/accel) that the
// OpenCL and CUDA backends compile at run time.
//
// Kernels know nothing about devices or scheduling: they are told a format
// and they run it on the CPU.
package kernels
