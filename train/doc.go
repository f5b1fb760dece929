// Package train builds predictors: it derives training tensors from
// SuiteSparse matrices, labels them by measuring every format on the
// devices at hand (resumably), trains the SPT-GCN and the baselines, and
// reports cross-validated accuracy. The runtime path never imports it.
package train
