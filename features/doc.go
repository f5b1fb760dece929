// Package features computes the global statistics of a tensor for an
// operation and mode: order, nonzeros, density, dims, nonzeros per slice
// and per fiber (mean, standard deviation, maximum, coefficient of
// variation), empty slices and rows, ELL padding and the HYB split. They
// feed the global input of the SPT-GCN and the baseline classifiers of
// package model.
//
// Summarize reads a tensor once for every op and mode: all of it up to
// ExactNNZ nonzeros, a fixed pseudo-random sample of SampleNNZ nonzeros
// beyond, so that a prediction costs a small part of the kernel it tunes.
// Summary.Global computes one (op, mode) from it, exactly or by the
// estimators it documents, deterministically whatever the number of
// threads. Global is Summarize then Summary.Global. Names, Ranges and the
// Feature constants document each entry of a Vector.
package features
