// Package features computes the global statistics of a tensor for an
// operation and mode: order, nonzeros, density, dims, nonzeros per slice
// and per fiber (mean, standard deviation, maximum, coefficient of
// variation), empty slices and rows, ELL padding and the HYB split. They
// feed the global input of the SPT-GCN and the baseline classifiers of
// package model.
//
// Global makes one pass over the nonzeros plus two counting passes, in
// O(dims) memory and deterministic whatever the number of threads. Fibers
// are counted exactly up to 2^16 nonzeros and on a fixed hash-selected
// sample of fibers beyond. Names, Ranges and the Feature constants
// document each entry of a Vector.
package features
