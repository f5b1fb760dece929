// Package graphenc lowers a tensor to the input of the SPT-GCN: the mapping
// matrix (the projection of all slices onto one slice shape), the weighted
// bipartite graph of its rows and columns, and the five statistics of each
// node, bounded to a fixed node budget by deterministic contiguous bucketing.
//
// SpTTMShape and MTTKRPShape say which two modes form the slice shape of an
// operation and mode; Encode makes two streaming passes over the nonzeros
// and returns a Graph of budget-shaped dense arrays, exact when the graph
// fits the budget. Statistics are accumulated in integers, so the result is
// the same whatever the number of threads.
package graphenc
