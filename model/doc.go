// Package model predicts the best storage format of a tensor for an
// operation and a device. It owns the SPT-GCN (forward and backward in Go),
// its export to ONNX and inference through onnx-go, the Predictor interface
// and its implementations: the GCN, baseline classifiers on global features,
// a hand-written rule, and measure-all, which times every candidate format
// and is both the oracle and the labeller.
package model
