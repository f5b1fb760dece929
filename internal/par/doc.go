// Package par runs a loop's contiguous ranges concurrently: the one
// helper the packages with parallel loops share.
package par
