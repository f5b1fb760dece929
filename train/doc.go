// Package train builds predictors: it derives training tensors from
// SuiteSparse matrices, labels them by measuring every format on the
// devices at hand (resumably), trains the SPT-GCN and the baselines, and
// reports cross-validated accuracy. The runtime path never imports it.
//
// # Generating tensors
//
// Generate turns a real matrix M into an order-3 or order-4 tensor that
// keeps M's structure, as a Spec describes: a chain of generators, each
// adding one mode — GenSlices (sampled, partly relabelled copies of M),
// GenLift (M times a sparse random vector, Zipf slice sizes), GenBand
// (copies shifted along the diagonal) and GenBursts (a time mode, each
// nonzero occurring in bursts). A Spec's TargetNNZ sets the size; every
// random draw comes from PCGs seeded by the Spec alone, so a Spec and the
// matrix file rebuild the tensor bit for bit.
//
// Plan draws a training set over a directory of matrices (ScanMatrices),
// spread over nonzero buckets from tens to millions; BenchPreset is the
// fixed set of large tensors the kernel benchmarks use. WriteSet writes a
// set and its manifest (one JSON Entry per tensor, ReadManifest, Rebuild),
// resumably. docs/generate.md describes the generators, the plan, the
// manifest and the preset.
//
// # Labelling
//
// Label times every candidate format of each tensor, operation, mode and
// device with the real kernels (hetero.MeasureFormats: conversion apart,
// a warm-up, then the formats' runs interleaved, the median of DefaultRuns
// runs, more for short kernels and fewer for long ones) and appends one
// LabelRow per (tensor, op, mode, device) to a labels file, one synced
// JSON line each, so that a killed run resumes where it stopped.
// ReadLabels reads such a file strictly; MixedBuilds says when its rows
// come from different builds. docs/train.md describes the file, the run
// rule, resuming and the cost.
//
// # Training and evaluation
//
// Fit reads each labelled tensor once, computes the inputs exactly as a
// prediction does (model.SummaryInput), cross-validates the SPT-GCN (one
// head per op and device class), the baselines (golearn's tree, our kNN),
// the hand rule and each fixed format on folds grouped by source
// (GroupFolds), and trains the final model of each op on every row.
// Evaluate scores model files on a labels file the same way. Scores
// gives accuracy, tie-aware accuracy and the oracle ratio per (op, device
// class) and predictor, with measure-all's cost; WritePlots draws
// training curves, confusion matrices and the oracle ratio by nonzero
// bucket. docs/train.md defines the report.
package train
