// Package formats owns sparsetune's canonical sparse tensor, formats.COO, and
// every storage format derived from it.
//
// A COO tensor of order N (2 <= N <= 8) stores its nonzeros as structure of
// arrays: Inds[m][k] is the 0-based mode-m index of nonzero k and Vals[k] its
// float32 value. Everything else in sparsetune is built from a COO:
//
//   - the readers and writers for FROSTT .tns, MatrixMarket .mtx and
//     sparsetune's checksummed binary format (.stb), each optionally gzipped;
//   - the mode-n fiber matrix of SpTTM (one row per non-empty mode-n fiber,
//     one column per mode-n index) in the formats COO, CSR, ELL and HYB, and its
//     split into slices, the work units of the CPU/accelerator split;
//   - the MTTKRP tensor formats CSF, HiCOO and ALTO (with BLCO blocks).
//
// Indices are limited to uint32, so each dimension is at most 2^32, and the
// modes' index bits (the sum over modes of ceil(log2 dim)) may total at most
// 128: that is the widest linear index ALTO and BLCO address, and it is what
// "the product of the dims overflows" means in error messages. The number of
// nonzeros is limited to 2^32-1, the width of the permutations used to sort.
//
// Every conversion from COO round-trips exactly (see the ToCOO methods), and
// every reader reports bad input as a *ParseError naming the file and the
// line (or byte offset) of the problem.
package formats
