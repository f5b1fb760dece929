package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/sparsetune/sparsetune/hetero"
)

func init() { register(newMTTKRPCmd) }

func newMTTKRPCmd(v *viper.Viper) *cobra.Command {
	return newKernelCmd(v, hetero.MTTKRP,
		"mttkrp [FILE] [--mode N] [--rank R] [--devices cpu,opencl:0,cuda:0] [--format auto|coo|csf|hicoo|alto] [--split peak|dynamic|random|cpu|acc] [--seed S] [--out M.npy|M.mtx]",
		"Input-aware MTTKRP, split between the CPU and an accelerator",
		`Compute the MTTKRP M = X₍ₙ₎(A_N ⊙ … ⊙ A_{n+1} ⊙ A_{n−1} ⊙ … ⊙ A_1) of a
tensor along mode n (1-based), with dense factors A_m (Iₘ x R) drawn from
--seed, the way package engine does it: the slices of mode n are split
between the CPU and the accelerator (--split, as for ttm), so each device
computes whole rows of M; each device runs its format (--format forces
one; auto takes a measured decision for this tensor, else the model's
prediction for the device); both run at once and the rows are gathered.
A single run (no --repeat) under auto runs the CPU's share in place,
with the COO kernel on the nonzeros as read (format source one-run):
converting to the predicted format costs many runs of its kernel, and
pays only when the plan runs again (--repeat K, cpd).

An accelerator that fails, or has no kernel for the format, has its
slices redone on the CPU, with a warning: the result is still exact.
Ctrl-C stops the run and writes nothing.

It prints the same per-device table and totals as ttm (flops N·nnz·R);
--json prints them as one object. --out writes M as NumPy float32 in C
order (.npy) or as a MatrixMarket array (.mtx). The factors are the same
for every split and device (and factor m is ttm's U for mode m), so results
can be compared across them.

--repeat K plans once and runs K times: the table shows the median run,
each device's conversion and setup paid once, and the spread of the runs,
so the warm balance (what a decomposition sees every iteration) can be
measured.

--verify then checks the result against the definition, computed on the
CPU in float64, and fails above a relative error of 1e-4.

Without FILE, mttkrp runs on the embedded sample tensor.`)
}
