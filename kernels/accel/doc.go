// Package accel holds the source of sparsetune's accelerator kernels: one
// body, body.cl, written against a handful of macros, and a thin header per
// backend (opencl.h, cuda.h) that defines them. The OpenCL and CUDA
// backends compile [Source] for their device at run time, so building
// sparsetune needs no GPU toolkit and both backends run the same kernels.
//
// The kernels, all float32 with float32 accumulation, are:
//
//   - SpTTM Y = F·Uᵀ on the fiber matrix F: spttm_csr and spttm_ell give
//     each (row, rank column) one work-item and write Y without atomics;
//     spttm_coo gives each work-item a chunk of consecutive entries and one
//     rank column, adds up runs of one row privately and flushes each run
//     with one atomic add. HYB is spttm_ell, then spttm_coo adding the
//     remainder to the same Y.
//   - MTTKRP on a tensor: mttkrp_coo works like spttm_coo, on nonzeros
//     sorted by the output mode; mttkrp_csf gives each (root fiber, rank
//     column) one work-item, which walks the fiber's tree depth first with
//     the factor products of its ancestors kept per level and owns its
//     output row; mttkrp_alto decodes one nonzero per work-item from its
//     linear index, and for each rank column the work-group adds up every
//     run of equal output rows in local memory before one atomic update per
//     run (the BLCO idea).
//
// Float atomic adds are native in CUDA and a compare-and-swap loop on the
// float's bits in OpenCL 1.2, which has no float atomics.
//
// Index arrays of all modes travel in one buffer, mode-major, and the
// factor matrices in another, with per-mode offsets in a small ulong
// "meta" buffer, so that one kernel serves every tensor order up to
// [MaxOrder].
package accel
