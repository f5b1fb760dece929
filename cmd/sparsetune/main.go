// Command sparsetune reads sparse tensors, describes and converts them, and
// runs sparse tensor kernels in the storage format best suited to each
// tensor and device.
//
// Usage:
//
//	sparsetune ttm [FILE] [--mode N] [--rank R] [--devices cpu,opencl:0] [--split peak|dynamic|random|cpu|acc] [--out Y.tns] [--json]
//	sparsetune mttkrp [FILE] [--mode N] [--rank R] [--devices cpu,opencl:0] [--split ...] [--out M.npy] [--json]
//	sparsetune info [FILE] [--json]
//	sparsetune convert IN OUT
//	sparsetune cpd FILE --rank R [--out PREFIX] [--json]
//	sparsetune tucker FILE --ranks R1,R2,... [--out PREFIX] [--json]
//	sparsetune cpapr FILE --rank R [--out PREFIX] [--json]
//
// Files are FROSTT .tns, MatrixMarket .mtx or sparsetune binary .stb, each
// optionally gzipped (.gz). Modes are numbered from 1, as in SPLATT and
// FROSTT. Settings come from flags, then SPARSETUNE_* environment variables,
// then a sparsetune.yaml config file (see README.md).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "sparsetune: %v\n", oneLine(err))
		os.Exit(1)
	}
}
