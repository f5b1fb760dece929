// Package decomp computes decompositions of sparse tensors: CP by
// alternating least squares (CPALS), Tucker by higher-order orthogonal
// iteration (TuckerHOOI) and non-negative CP of count data by Chi and
// Kolda's alternating Poisson regression with multiplicative updates
// (CPAPR).
package decomp
