// Package decomp computes decompositions of sparse tensors of order 3 or
// more:
//
//   - CPALS: a rank-R CP model [[λ; A_1, …, A_N]] by alternating least
//     squares, with an optional line-search extrapolation;
//   - TuckerHOOI: a Tucker model G ×_1 U_1 … ×_N U_N by higher-order
//     orthogonal iteration;
//   - CPAPR: a non-negative CP model of count data by Chi and Kolda's
//     alternating Poisson regression with multiplicative updates.
//
// The sparse work of each method is one kernel that decomp reaches through
// a small interface of its own: MTTKRPer (CP-ALS) and TTMChainer (Tucker).
// EngineKernels supplies CP-ALS's through package engine, one plan per
// mode choosing the format per mode and device and splitting the work
// between the CPU and an accelerator; whenever Options leaves them nil, CPU runs
// package kernels on the CPU, converting the tensor once per mode (once in
// all for ALTO, the default, which serves every mode) before the first
// iteration. CP-APR's Φ, an MTTKRP-like kernel that divides by the model
// at each nonzero, is written here in Go over per-mode sorted copies of
// the nonzeros.
//
// Everything else is dense and small (R x R systems, Gram matrices, SVDs
// of the TTM chain) and runs in float64; factors are stored as float32
// kernels.Matrix values, the layout the kernels read, and that precision
// bounds what the methods can resolve: see maxCond in dense.go.
//
// Every method reports, per iteration, an IterStat (fit or log-likelihood,
// its change, wall time split into kernel and dense time) through
// Options.Progress and in the result's History. Results write themselves
// as NumPy .npy files (WriteNPY). Bad input gives one-line errors; an
// ill-conditioned or rank-deficient problem gives finite factors, never
// NaN. docs/decomp.md describes the algorithms, stopping rules,
// initialisations and files.
package decomp
