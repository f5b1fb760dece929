// Package graphenc lowers a tensor to the input of the SPT-GCN: the mapping
// matrix (the projection of all slices onto one slice shape), the weighted
// bipartite graph of its rows and columns, and the five statistics of each
// node, bounded to a fixed node budget by deterministic contiguous bucketing.
package graphenc
