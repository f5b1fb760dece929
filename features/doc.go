// Package features computes global statistics of a tensor for a given
// operation and mode (order, nonzeros, density, dimensions, nonzeros per
// slice and per fiber, padding ratios, ...). They feed the global head of the
// SPT-GCN and the baseline classifiers of package model.
package features
